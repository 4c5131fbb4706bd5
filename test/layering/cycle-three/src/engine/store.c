#include "store/store.h"
#include "engine/scope.h"
