#include "engine/scope.h"

#include "engine/apply.h"
