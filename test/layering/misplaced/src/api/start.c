#include "../engine/engine.h"
