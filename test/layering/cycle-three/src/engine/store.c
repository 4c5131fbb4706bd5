#include "engine/store.h"
#include "engine/scope.h"
