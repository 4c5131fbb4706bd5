#include "store/store.h"
#include "worker/worker.h"
