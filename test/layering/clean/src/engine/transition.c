#include "engine/transition.h"
