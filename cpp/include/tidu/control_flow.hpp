// tidu/control_flow.hpp - kept for one release: forwards to <tidu/vm/control_flow.hpp>; include that instead.
#pragma once

#include "tidu/vm/control_flow.hpp"
