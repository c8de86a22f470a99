// tidu/checked.hpp - kept for one release: forwards to <tidu/vm/checked.hpp>; include that instead.
#pragma once

#include "tidu/vm/checked.hpp"
