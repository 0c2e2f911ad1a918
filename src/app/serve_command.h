#pragma once

// `rampart serve`: builds every part the settings ask for, serves until SIGINT or SIGTERM
// (SIGHUP reloads the gateway's routes and the access policy), then drains and stops.

#include "app/settings.h"

namespace rampart::app {

// The process's exit code: 0 after a clean stop, 1 when something could not start (the reason is
// logged).
int Serve(const ServeSettings& settings);

}  // namespace rampart::app
