// See streams.h.
#include "model/streams.h"

#include <algorithm>

namespace ldscope::model::streams {
namespace {

// A noexec mount, once per mount point and options however many traces name it.
void AddMount(const v1::MountFacts& m, v1::Timeline* tl) {
  v1::Mount* to = nullptr;
  for (auto& have : *tl->mutable_noexec_mounts())
    if (have.mount_point() == m.mount_point() && have.options() == m.options()) to = &have;
  if (to == nullptr) {
    to = tl->add_noexec_mounts();
    to->set_mount_point(m.mount_point());
    to->set_fs_type(m.fs_type());
    to->set_source(m.source());
    to->set_options(m.options());
  }
  for (const auto& d : m.dirs())
    if (std::find(to->dirs().begin(), to->dirs().end(), d) == to->dirs().end()) to->add_dirs(d);
}

// A file's owner, as recorded.
void AddOwner(const v1::OwnerFacts& o, v1::Timeline* tl) {
  v1::Owner* to = tl->add_owners();
  for (const auto& p : o.paths()) to->add_paths(p);
  to->set_manager(o.manager());
  to->set_name(o.name());
  to->set_version(o.version());
  to->set_record(o.record());
  to->set_unknown(o.unknown());
  to->set_arch(o.arch());
  for (const auto& t : o.tags()) to->add_tags(t);
  for (const auto& r : o.requires_dist()) to->add_requires_dist(r);
  to->set_root(o.root());
}

// The collector's records: its notes, a noexec mount, or a file's owner.
void AddNotes(const v1::Event& e, v1::Timeline* tl, Notes* notes) {
  if (e.has_mount_facts()) return AddMount(e.mount_facts(), tl);
  if (e.has_owner_facts()) return AddOwner(e.owner_facts(), tl);
  const v1::CollectorNotes& n = e.collector();
  v1::CollectorSummary* c = tl->mutable_collector();
  c->set_still_running(c->still_running() + n.still_running_size());
  c->set_held_by_children(c->held_by_children() + n.held_by_children());
  c->set_untraced_after(c->untraced_after() + n.untraced_after_size());
  c->set_accept_deferred(c->accept_deferred() + n.accept_deferred());
  c->set_fd_limit(std::max(c->fd_limit(), n.fd_limit()));
  c->set_refused(c->refused() + n.refused());
  for (const auto& r : n.still_running()) notes->still_running.insert({r.pid(), r.image_start_ns()});
  for (const auto& u : n.untraced_after())
    notes->untraced_after[{u.image().pid(), u.image().image_start_ns()}] = u.exe_after();
  for (const auto& r : n.python_hook_silent()) notes->python_hook_silent.insert({r.pid(), r.image_start_ns()});
  if (n.command_pid() != 0) {
    notes->command_pid = n.command_pid();
    notes->command_exit_status = n.command_exit_status();
    notes->command_signal = n.command_signal();
  }
}

}  // namespace

void StreamEvents::Seal() {
  std::stable_sort(decoded_.begin(), decoded_.end(),
                   [](const v1::Event* a, const v1::Event* b) { return a->seq() < b->seq(); });
  if (groups_.size() < 2) return;
  // Each stream is in seq order already, equal seqs in file order: merged by (seq,
  // file offset), each record's seq read back from it once, when it is a stream's next.
  size_t n = 0;
  for (const auto* g : groups_) n += g->records.size();
  merged_.reserve(n);
  struct Head {
    uint32_t next = 0;
    uint64_t seq = 0, at = 0;
  };
  std::vector<Head> heads(groups_.size());
  const auto read = [&](uint32_t g) {
    Head& h = heads[g];
    if (h.next < groups_[g]->records.size()) {
      h.at = groups_[g]->records[h.next];
      h.seq = store::SeqAt(*file_, h.at);
    }
  };
  for (uint32_t g = 0; g < groups_.size(); ++g) read(g);
  for (size_t k = 0; k < n; ++k) {
    uint32_t best = UINT32_MAX;
    for (uint32_t g = 0; g < groups_.size(); ++g) {
      const Head& h = heads[g];
      if (h.next < groups_[g]->records.size() &&
          (best == UINT32_MAX || h.seq < heads[best].seq || (h.seq == heads[best].seq && h.at < heads[best].at)))
        best = g;
    }
    merged_.emplace_back(best, heads[best].next++);
    read(best);
    if ((k & 0x3ffff) == 0x3ffff) file_->bytes->Trim();  // a mapping's pages read so far
  }
}

v1::Event StreamEvents::First() const {
  if (!decoded_.empty()) return *decoded_.front();
  if (groups_.size() == 1) return store::DecodeAlone(*file_, *groups_[0], groups_[0]->records.front());
  return store::DecodeAlone(*file_, *groups_[merged_.front().first], Rec(merged_.front()));
}

std::vector<v1::Event> StreamEvents::Starts() const {
  std::vector<v1::Event> out;
  for (const v1::Event* e : decoded_)
    if (e->has_process_start()) out.push_back(*e);
  if (groups_.size() == 1) {
    for (uint32_t i : groups_[0]->starts)
      out.push_back(store::DecodeAlone(*file_, *groups_[0], groups_[0]->records[i]));
  } else if (groups_.size() > 1) {
    std::set<std::pair<uint32_t, uint32_t>> starts;
    for (uint32_t g = 0; g < groups_.size(); ++g)
      for (uint32_t i : groups_[g]->starts) starts.emplace(g, i);
    for (const auto& m : merged_)
      if (starts.count(m) != 0) out.push_back(store::DecodeAlone(*file_, *groups_[m.first], Rec(m)));
  }
  return out;
}

Streams ReadStreams(const store::TraceSet& traces, v1::Timeline* tl) {
  Streams s;
  for (const auto& f : traces.files) {
    if (!f.ok()) {
      auto* p = tl->add_problems();
      p->set_file(f.problem->file);
      p->set_offset(f.problem->offset);
      p->set_message(f.problem->message);
    }
    if (tl->pid_namespace() == 0) tl->set_pid_namespace(f.header.pid_namespace());
    if (tl->nvidia_driver_source().empty() && !f.header.nvidia_driver_source().empty()) {
      tl->set_nvidia_driver_source(f.header.nvidia_driver_source());
      tl->set_nvidia_driver_version(f.header.nvidia_driver_version());
    }
    for (const auto& e : f.events) {
      if (e.has_collector() || e.has_mount_facts() || e.has_owner_facts()) {
        AddNotes(e, tl, &s.notes);
        continue;
      }
      s.by_stream[e.stream()].Add(&e);
      s.writer_ns[e.stream()] = f.header.pid_namespace();
    }
    // An indexed file: its collector's notes (in file order), then its streams.
    if (!f.collector.empty()) {
      store::EventStream none;
      for (const auto& [at, stream] : f.collector) {
        AddNotes(store::DecodeAlone(f, none, at), tl, &s.notes);
      }
    }
    for (const auto& es : f.streams) {
      s.by_stream[es.stream].Add(&f, &es);
      s.writer_ns[es.stream] = f.header.pid_namespace();
    }
  }
  for (auto& [stream, evs] : s.by_stream) evs.Seal();
  for (const auto& err : traces.errors) tl->add_problems()->set_message(err);
  return s;
}

std::vector<Image> Images(const std::map<uint32_t, StreamEvents>& by_stream,
                          std::vector<std::pair<uint32_t, const PyStream*>>* py_streams,
                          std::deque<PyEvents>* py_events, std::deque<PyStream>* py_pointers) {
  std::vector<Image> images;
  for (const auto& [stream, evs] : by_stream) {
    const v1::Event first = evs.First();
    if (first.has_py_start()) {
      PyEvents& owned = py_events->emplace_back();
      owned.reserve(evs.size());
      evs.ForEach([&](const v1::Event& e) {
        owned.push_back(e);
        return true;
      });
      PyStream& ptrs = py_pointers->emplace_back();
      for (const auto& e : owned) ptrs.push_back(&e);
      py_streams->emplace_back(first.pid(), &ptrs);
      continue;
    }
    Image img;
    img.stream = stream;
    img.events = &evs;
    img.pid = first.pid();
    img.first_ns = first.mono_ns();
    // The image's start event: the first that is not a reconnect's, else the first.
    std::vector<v1::Event> starts = evs.Starts();
    for (const auto& e : starts)
      if (e.process_start().not_traced() != v1::NOT_TRACED_UNSPECIFIED) {
        img.not_traced = e.process_start().not_traced();
        img.fd_limit = e.process_start().fd_limit();
      }
    for (auto& e : starts)
      if (e.process_start().reason() != v1::START_RECONNECT) {
        img.start_event = std::move(e);
        break;
      }
    if (!img.start_event && !starts.empty()) img.start_event = std::move(starts.front());
    if (img.start() != nullptr && img.start()->image_start_ns() != 0) img.first_ns = img.start()->image_start_ns();
    images.push_back(std::move(img));
  }
  std::stable_sort(images.begin(), images.end(),
                   [](const Image& a, const Image& b) { return a.first_ns < b.first_ns; });
  return images;
}

std::vector<std::vector<const PyStream*>> PyStreamsOf(
    const std::vector<Image>& images, const std::vector<std::pair<uint32_t, const PyStream*>>& py_streams) {
  std::map<uint32_t, std::vector<size_t>> of_pid;  // pid -> its images, in start order
  for (size_t i = 0; i < images.size(); ++i) of_pid[images[i].pid].push_back(i);
  std::vector<std::vector<const PyStream*>> out(images.size());
  for (const auto& [pid, evs] : py_streams) {
    auto it = of_pid.find(pid);
    if (it == of_pid.end()) continue;
    size_t home = it->second.front();
    for (size_t i : it->second)
      if (images[i].first_ns <= evs->front()->mono_ns()) home = i;
    out[home].push_back(evs);
  }
  return out;
}

void StartProcess(const Image& img, const Streams& streams, v1::ProcessTimeline* p) {
  p->set_stream(img.stream);
  p->set_pid(img.pid);
  if (img.start() != nullptr) {
    const auto& s = *img.start();
    p->set_ppid(s.ppid());
    p->set_exe(s.exe());
    for (const auto& a : s.argv()) p->add_argv(a);
    p->set_cwd(s.cwd());
    p->set_glibc_version(s.glibc_version());
    p->set_start_reason(s.reason());
    for (const auto& ev : s.env())
      if (!ev.redacted()) (*p->mutable_env())[ev.name()] = ev.value();
    p->set_start_truncated(img.start_event->truncated());
    if (s.pid_namespace() != 0 && s.pid_namespace() != streams.writer_ns.at(img.stream))
      p->set_pid_namespace(s.pid_namespace());
  }
  // A forked child's memory image is its parent's: its offsets count from the parent
  // image's start, not from the child's first event.
  const v1::ProcessStart* start = img.start();
  const bool forked = start != nullptr && start->reason() == v1::START_FORK && start->parent_image_start_ns() != 0 &&
                      start->parent_image_start_ns() <= img.first_ns;
  p->set_start_mono_ns(forked ? start->parent_image_start_ns() : img.first_ns);
  const std::pair<uint32_t, uint64_t> key{img.pid, start ? start->image_start_ns() : 0};
  p->set_still_running(streams.notes.still_running.count(key) != 0);
  p->set_python_hook_silent(streams.notes.python_hook_silent.count(key) != 0);
  p->set_not_traced(img.not_traced);
  p->set_fd_limit(img.fd_limit);
  if (streams.notes.command_pid != 0 && img.pid == streams.notes.command_pid) {
    p->set_exit_status(streams.notes.command_exit_status);
    p->set_killed_by_signal(streams.notes.command_signal);
  }
  if (auto u = streams.notes.untraced_after.find(key); u != streams.notes.untraced_after.end()) {
    p->set_untraced_after(true);
    p->set_exe_after(u->second);
  }
}

}  // namespace ldscope::model::streams
