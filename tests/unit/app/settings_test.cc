#include "app/settings.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace rampart::app {
namespace {

std::string WriteTemp(const std::string& text) {
  const auto path =
      std::filesystem::temp_directory_path() /
      ("rampart_settings_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
       "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".yaml");
  std::ofstream(path) << text;
  return path.string();
}

TEST(Settings, YamlOverridesOnlyTheKeysItNames) {
  ServeSettings settings;
  const std::string path = WriteTemp(
      "server:\n  model_repository: /models\n  load_models: [a, b]\nhttp:\n  port: 9000\n"
      "  max_input_size: 1024\n");
  ASSERT_TRUE(ApplyYamlFile(path, settings).ok());
  EXPECT_EQ(settings.model_repository, "/models");
  EXPECT_EQ(settings.load_models, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(settings.http_port, 9000);
  EXPECT_EQ(settings.http_max_input_size, 1024u);
  EXPECT_EQ(settings.http_address, "0.0.0.0");  // untouched default
  std::filesystem::remove(path);
}

TEST(Settings, UnknownKeysAndWrongTypesAreErrors) {
  ServeSettings settings;
  const std::string typo = WriteTemp("http:\n  prot: 9000\n");
  Status status = ApplyYamlFile(typo, settings);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("unknown key 'http.prot'"), std::string::npos);
  const std::string wrong_type = WriteTemp("http:\n  port: lots\n");
  status = ApplyYamlFile(wrong_type, settings);
  EXPECT_NE(status.message().find("'http.port' has the wrong type"), std::string::npos);
  const std::string section = WriteTemp("gateway: {}\n");
  EXPECT_NE(ApplyYamlFile(section, settings).message().find("unknown section 'gateway'"),
            std::string::npos);
  EXPECT_EQ(ApplyYamlFile("/nonexistent/rampart.yaml", settings).code(), StatusCode::kNotFound);
  for (const auto& path : {typo, wrong_type, section}) std::filesystem::remove(path);
}

TEST(Settings, ValidateRejectsImpossibleValues) {
  ServeSettings settings;
  EXPECT_FALSE(Validate(settings).ok());  // no repository
  settings.model_repository = "/models";
  EXPECT_TRUE(Validate(settings).ok());
  settings.model_control_mode = "sometimes";
  EXPECT_FALSE(Validate(settings).ok());
  settings.model_control_mode = "none";
  settings.http_port = 70000;
  EXPECT_FALSE(Validate(settings).ok());
  settings.http_port = 0;
  settings.http_max_input_size = 0;
  EXPECT_FALSE(Validate(settings).ok());
}

}  // namespace
}  // namespace rampart::app
