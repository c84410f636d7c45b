// epoll and eventfd (Linux, in glibc itself: nothing to link), which Swift's Glibc module leaves
// out. Used by the plain port's HTTP/1.1 loops.
#include <sys/epoll.h>
#include <sys/eventfd.h>

// The flags as plain integers (glibc declares them as enums with macros of the same names).
static const int FCM_EPOLL_CLOEXEC = EPOLL_CLOEXEC;
static const int FCM_EFD_FLAGS = EFD_NONBLOCK | EFD_CLOEXEC;
static const unsigned int FCM_EPOLLIN = EPOLLIN;
static const unsigned int FCM_EPOLLOUT = EPOLLOUT;
static const unsigned int FCM_EPOLLRDHUP = EPOLLRDHUP;
static const unsigned int FCM_EPOLLHUP = EPOLLHUP;
static const unsigned int FCM_EPOLLERR = EPOLLERR;
static const unsigned int FCM_EPOLLET = EPOLLET;
