#include "core/units.h"
#include "engine/store.h"
