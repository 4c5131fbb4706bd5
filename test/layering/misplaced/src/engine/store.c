#include "inbox/inbox.h"
