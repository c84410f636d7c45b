#include <expat.h>

// Fixed names for expat's status values, which Swift imports as a renamed enum.
static const enum XML_Status FCM_XML_STATUS_ERROR = XML_STATUS_ERROR;
static const enum XML_Status FCM_XML_STATUS_OK = XML_STATUS_OK;
