// tidu/interner.hpp - kept for one release: forwards to <tidu/graph/interner.hpp>; include that instead.
#pragma once

#include "tidu/graph/interner.hpp"
