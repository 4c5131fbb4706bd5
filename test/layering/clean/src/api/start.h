#include "engine/store.h"
