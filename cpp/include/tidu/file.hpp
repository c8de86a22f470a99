// tidu/file.hpp - kept for one release: forwards to <tidu/vm/file.hpp>; include that instead.
#pragma once

#include "tidu/vm/file.hpp"
