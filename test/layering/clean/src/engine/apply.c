#include "store/store.h"
#include "engine/transition.h"
