#include "graph/b.h"
#include "graph/c.h"
