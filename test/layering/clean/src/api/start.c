  #  include "engine/store.h"
#include "utils/builtins.h"
