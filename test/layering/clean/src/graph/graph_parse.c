#include "graph/graph.h"
#include "common/json.h"
