/* The floor for any LD_AUDIT tool: an auditor whose hooks do nothing. */
#define _GNU_SOURCE
#include <link.h>
#include <stdint.h>

unsigned int la_version(unsigned int v) { return v < LAV_CURRENT ? v : LAV_CURRENT; }
char* la_objsearch(const char* name, uintptr_t* cookie, unsigned int flag) {
  (void)cookie;
  (void)flag;
  return (char*)name;
}
unsigned int la_objopen(struct link_map* map, Lmid_t lmid, uintptr_t* cookie) {
  (void)map;
  (void)lmid;
  (void)cookie;
  return 0;
}
unsigned int la_objclose(uintptr_t* cookie) {
  (void)cookie;
  return 0;
}
void la_activity(uintptr_t* cookie, unsigned int flag) {
  (void)cookie;
  (void)flag;
}
void la_preinit(uintptr_t* cookie) { (void)cookie; }
