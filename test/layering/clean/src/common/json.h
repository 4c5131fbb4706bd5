#include "postgres.h"
#include "lib/stringinfo.h"
