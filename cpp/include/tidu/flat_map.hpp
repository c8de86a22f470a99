// tidu/flat_map.hpp - kept for one release: forwards to <tidu/graph/flat_map.hpp>; include that instead.
#pragma once

#include "tidu/graph/flat_map.hpp"
