// tidu/parallel.hpp - kept for one release: forwards to <tidu/vm/parallel.hpp>; include that instead.
#pragma once

#include "tidu/vm/parallel.hpp"
