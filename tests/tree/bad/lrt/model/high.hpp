// A model header (the target of core/low.hpp's forbidden include).
#pragma once
