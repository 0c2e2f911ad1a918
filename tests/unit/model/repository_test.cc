#include "model/repository.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

namespace rampart::model {
namespace {

namespace fs = std::filesystem;

class RepositoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("rampart_repo_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  void WriteModel(const std::string& name, const std::string& extra,
                  std::initializer_list<std::string> versions) {
    fs::create_directories(root_ / name);
    std::ofstream(root_ / name / "config.pbtxt")
        << "backend: \"pytorch\"\n"
        << extra
        << "input [ { name: \"x\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
           "output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n";
    for (const std::string& version : versions) fs::create_directories(root_ / name / version);
  }

  fs::path root_;
};

TEST_F(RepositoryTest, ListsModelFoldersOnly) {
  WriteModel("b", "", {"1"});
  WriteModel("a", "", {"1"});
  fs::create_directories(root_ / ".hidden");
  std::ofstream(root_ / "README.md") << "not a model";
  auto names = ListModels(root_);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ListModels(root_ / "missing").status().code(), StatusCode::kNotFound);
}

TEST_F(RepositoryTest, VersionFoldersAreNumericOnly) {
  WriteModel("m", "", {"3", "1", "10", "latest", "-2"});
  EXPECT_EQ(ListVersions(root_ / "m"), (std::vector<int64_t>{1, 3, 10}));
}

// "02" would be version 2, loaded from the folder "2": skipped (and named), as Triton skips it.
TEST_F(RepositoryTest, VersionFoldersWithLeadingZerosAreSkipped) {
  WriteModel("m", "", {"0", "1", "02", "007", "00", "-0", "+3"});
  std::vector<std::string> skipped;
  EXPECT_EQ(ListVersions(root_ / "m", &skipped), (std::vector<int64_t>{0, 1}));
  std::sort(skipped.begin(), skipped.end());
  EXPECT_EQ(skipped, (std::vector<std::string>{"00", "007", "02"}));
}

TEST(SelectVersions, AppliesEachPolicy) {
  const std::vector<int64_t> present = {1, 2, 5, 7};
  inference::ModelVersionPolicy latest;
  latest.mutable_latest()->set_num_versions(2);
  EXPECT_EQ(SelectVersions(latest, present), (std::vector<int64_t>{5, 7}));
  inference::ModelVersionPolicy all;
  all.mutable_all();
  EXPECT_EQ(SelectVersions(all, present), present);
  inference::ModelVersionPolicy specific;
  specific.mutable_specific()->add_versions(2);
  specific.mutable_specific()->add_versions(9);
  EXPECT_EQ(SelectVersions(specific, present), (std::vector<int64_t>{2}));
}

TEST_F(RepositoryTest, ReadModelSelectsLatestByDefault) {
  WriteModel("m", "", {"1", "2"});
  auto source = ReadModel(root_ / "m");
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->name, "m");
  EXPECT_EQ(source->versions, (std::vector<int64_t>{2}));
}

TEST_F(RepositoryTest, ReadModelReportsWhatIsMissing) {
  fs::create_directories(root_ / "empty");
  Status no_config = ReadModel(root_ / "empty").status();
  EXPECT_EQ(no_config.code(), StatusCode::kNotFound);
  EXPECT_NE(no_config.message().find("config.pbtxt"), std::string::npos);

  WriteModel("noversions", "", {});
  EXPECT_NE(ReadModel(root_ / "noversions").status().message().find("no version folders"),
            std::string::npos);

  WriteModel("policy", "version_policy { specific { versions: [ 9 ] } }\n", {"1"});
  EXPECT_NE(ReadModel(root_ / "policy").status().message().find("selects none"), std::string::npos);
}

// A load request's config override replaces config.pbtxt as a whole, as in Triton; what it leaves
// out is completed as Triton completes it: the name from the folder, backend and platform from a
// model.pt in the first version folder.
TEST_F(RepositoryTest, AnOverrideIsCompletedFromTheFolderNotFromConfigPbtxt) {
  WriteModel("m", "max_batch_size: 8\n", {"1"});
  std::ofstream(root_ / "m" / "1" / "model.pt") << "scripted";
  ModelConfig override;
  auto* input = override.add_input();
  input->set_name("a");
  input->set_data_type(inference::TYPE_INT32);
  input->add_dims(4);
  auto* output = override.add_output();
  output->set_name("b");
  output->set_data_type(inference::TYPE_INT32);
  output->add_dims(4);
  auto source = ReadModelWithConfig(root_ / "m", override);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->config.name(), "m");
  EXPECT_EQ(source->config.backend(), "pytorch");
  EXPECT_EQ(source->config.platform(), "pytorch_libtorch");
  EXPECT_EQ(source->config.max_batch_size(), 0);  // not config.pbtxt's 8
  EXPECT_EQ(source->config.input(0).name(), "a");
  EXPECT_EQ(source->versions, (std::vector<int64_t>{1}));

  // Triton looks in the first folder by name only: "1" has no model.pt here.
  fs::create_directories(root_ / "n" / "1");
  fs::create_directories(root_ / "n" / "2");
  std::ofstream(root_ / "n" / "2" / "model.pt") << "scripted";
  Status missing = ReadModelWithConfig(root_ / "n", override).status();
  EXPECT_NE(missing.message().find("one of 'platform' or 'backend' is required"), std::string::npos)
      << missing.message();
}

// Triton completes config.pbtxt the same way.
TEST_F(RepositoryTest, AConfigWithoutBackendIsAPytorchModelWhenModelPtIsThere) {
  fs::create_directories(root_ / "m" / "1");
  std::ofstream(root_ / "m" / "config.pbtxt")
      << "input [ { name: \"x\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
         "output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n";
  EXPECT_FALSE(ReadModel(root_ / "m").ok());
  std::ofstream(root_ / "m" / "1" / "model.pt") << "scripted";
  auto source = ReadModel(root_ / "m");
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->config.backend(), "pytorch");
}

}  // namespace
}  // namespace rampart::model
