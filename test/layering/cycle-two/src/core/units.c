#include "core/units.h"
#include "store/store.h"
