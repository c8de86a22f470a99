// tidu/scalar.hpp - kept for one release: forwards to <tidu/vm/scalar.hpp>; include that instead.
#pragma once

#include "tidu/vm/scalar.hpp"
