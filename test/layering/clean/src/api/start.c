  #  include "store/store.h"
#include "utils/builtins.h"
