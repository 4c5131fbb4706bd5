#include "engine/store.h"
#include "worker/worker.h"
