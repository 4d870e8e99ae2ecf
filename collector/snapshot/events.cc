// A snapshot as trace events (snapshot.h's ToEvents), and which objects ld.so loaded
// at start-up, as the main namespace's order and DT_NEEDED entries show.
#include <algorithm>
#include <map>
#include <string>

#include "encode.h"  // audit/: LoaderRelevantEnv, the rule the audit library records by
#include "snapshot/snapshot.h"

namespace ldscope::snapshot {
namespace {

std::string BaseName(const std::string& p) { return p.substr(p.rfind('/') + 1); }

struct StartUp {
  size_t requester = SIZE_MAX;  // index of the object whose entry named it
  std::string name;             // that entry
  bool preload = false;
};

// ld.so maps, at start-up and before anything else, the executable, its LD_PRELOAD
// entries, then the NEEDED entries breadth-first, each object appended to the main
// namespace's list when it is first named (ld.so itself and the vDSO are placed apart).
// Walking the list with that rule gives each start-up object the entry that named it;
// the first object the rule does not account for ends the start-up objects: it and
// everything after it were loaded later (dlopen), or the rule cannot tell, and get no
// start-up reason.
std::map<size_t, StartUp> StartUpObjects(const Process& p) {
  std::map<size_t, StartUp> out;
  std::vector<size_t> ns0;
  for (size_t i = 0; i < p.objects.size(); ++i)
    if (p.objects[i].lmid == 0) ns0.push_back(i);
  if (ns0.empty() || !p.objects[ns0[0]].is_main) return out;
  // The objects in list order the rule must account for (ld.so and the vDSO are not).
  std::vector<size_t> order;
  for (size_t i : ns0)
    if (!p.objects[i].is_ldso && !p.objects[i].is_vdso && !p.objects[i].is_main) order.push_back(i);
  size_t next = 0;                        // the next of `order` to be accounted for
  std::vector<size_t> placed = {ns0[0]};  // main, then each start-up object in order
  auto matches = [&](size_t i, const std::string& name) {
    const Object& o = p.objects[i];
    if (name.find('/') != std::string::npos) return o.name == name;
    return o.soname == name || BaseName(o.name) == name;
  };
  // Already loaded: a placed object, ld.so, or the vDSO answers the name.
  auto loaded = [&](const std::string& name) {
    for (size_t i : placed)
      if (matches(i, name)) return true;
    for (size_t i : ns0)
      if ((p.objects[i].is_ldso || p.objects[i].is_vdso) && matches(i, name)) return true;
    return false;
  };
  auto take = [&](const std::string& name, size_t requester, bool preload) {
    if (loaded(name)) return true;
    if (next >= order.size() || !matches(order[next], name)) return false;
    out[order[next]] = {requester, name, preload};
    placed.push_back(order[next]);
    ++next;
    return true;
  };
  for (const auto& e : p.environ) {
    if (e.rfind("LD_PRELOAD=", 0) != 0) continue;
    std::string list = e.substr(11);
    std::replace(list.begin(), list.end(), '\t', ' ');
    std::replace(list.begin(), list.end(), ':', ' ');
    size_t at = 0;
    while (at < list.size()) {
      size_t end = list.find(' ', at);
      if (end == std::string::npos) end = list.size();
      if (end > at && !take(list.substr(at, end - at), ns0[0], true)) return out;
      at = end + 1;
    }
  }
  for (size_t k = 0; k < placed.size(); ++k) {
    const Object& o = p.objects[placed[k]];
    for (const auto& n : o.needed)
      if (!take(n, placed[k], false)) return out;
  }
  return out;
}

}  // namespace

std::vector<v1::Event> ToEvents(const Process& p) {
  std::vector<v1::Event> out;
  uint64_t seq = 0;
  auto event = [&]() -> v1::Event& {
    v1::Event& e = out.emplace_back();
    e.set_pid(static_cast<uint32_t>(p.ns_pid));
    e.set_tid(static_cast<uint32_t>(p.ns_pid));
    e.set_seq(seq++);
    e.set_mono_ns(p.read_mono_ns);
    return e;
  };
  {
    v1::Event& e = event();
    e.set_mono_ns(p.start_mono_ns);
    auto* s = e.mutable_process_start();
    s->set_reason(v1::START_SNAPSHOT);
    s->set_ppid(p.ppid);
    s->set_exe(p.exe);
    for (const auto& a : p.argv) s->add_argv(a);
    s->set_cwd(p.cwd);
    s->set_glibc_version(p.glibc_version);
    s->set_image_start_ns(p.start_mono_ns);
    s->set_pid_namespace(p.pid_namespace);
    for (const auto& entry : p.environ) {
      auto* v = s->add_env();
      const size_t eq = entry.find('=');
      v->set_name(entry.substr(0, eq));
      if (ldscope::audit::LoaderRelevantEnv(entry.c_str())) {
        if (eq != std::string::npos) v->set_value(entry.substr(eq + 1));
      } else {
        v->set_redacted(true);
      }
    }
  }
  {
    auto* s = event().mutable_snapshot();
    s->set_pid(static_cast<uint32_t>(p.pid));
    s->set_found_via(p.found_via);
    s->set_r_version(static_cast<uint32_t>(p.r_version));
    s->set_tries(static_cast<uint32_t>(p.tries));
    s->set_statically_linked(p.statically_linked);
    s->set_namespaces(static_cast<uint32_t>(p.namespaces));
    for (const auto& n : p.notes) s->add_notes(n);
    s->set_read_ns(p.read_ns);
  }
  const std::map<size_t, StartUp> startup = StartUpObjects(p);
  for (size_t i = 0; i < p.objects.size(); ++i) {
    const Object& o = p.objects[i];
    auto* x = event().mutable_objopen();
    x->set_id(i + 1);
    x->set_path(o.is_vdso && o.path.empty() ? "linux-vdso.so.1" : o.path);
    x->set_lmid(o.lmid);
    x->set_base(o.l_addr);
    x->set_dev(o.dev);
    x->set_ino(o.ino);
    x->set_soname(o.soname);
    for (const auto& n : o.needed) x->add_needed(n);
    x->set_rpath(o.rpath);
    x->set_runpath(o.runpath);
    x->set_build_id(o.build_id);
    x->set_flags_1(o.flags_1);
    x->set_is_main(o.is_main);
    x->set_is_vdso(o.is_vdso);
    x->set_is_ldso(o.is_ldso);
    if (auto it = startup.find(i); it != startup.end()) {
      x->set_requested_by(it->second.requester + 1);
      x->set_requested(it->second.name);
      x->set_preload(it->second.preload);
    }
  }
  return out;
}

}  // namespace ldscope::snapshot
