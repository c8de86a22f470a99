// tidu/graph.hpp - kept for one release: forwards to <tidu/graph/graph.hpp>; include that instead.
#pragma once

#include "tidu/graph/graph.hpp"
