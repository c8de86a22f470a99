// tidu/scalarize.hpp - kept for one release: forwards to <tidu/vm/scalarize.hpp>; include that instead.
#pragma once

#include "tidu/vm/scalarize.hpp"
