#include "postgres.h"
#include "engine.h"
