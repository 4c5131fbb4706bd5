#include "graph/a.h"
