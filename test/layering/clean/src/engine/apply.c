#include "engine/store.h"
#include "engine/transition.h"
