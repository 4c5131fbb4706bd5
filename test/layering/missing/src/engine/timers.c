#include "postgres.h"
#include "engine/engine.h"
#include "engine/wake.h"
