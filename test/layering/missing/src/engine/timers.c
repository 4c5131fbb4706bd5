#include "postgres.h"
#include "engine/engine.h"
#include "core/wake.h"
