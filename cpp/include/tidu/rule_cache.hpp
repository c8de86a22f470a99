// tidu/rule_cache.hpp - kept for one release: forwards to <tidu/ad/rule_cache.hpp>; include that instead.
#pragma once

#include "tidu/ad/rule_cache.hpp"
