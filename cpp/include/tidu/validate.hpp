// tidu/validate.hpp - kept for one release: forwards to <tidu/vm/validate.hpp>; include that instead.
#pragma once

#include "tidu/vm/validate.hpp"
