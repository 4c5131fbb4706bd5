#include "postgres.h"
#include "miscadmin.h"
#include "engine.h"
