#pragma once
// Real runnel-node processes for the multiprocess tests: started with a port file, killed when
// the test is done with them.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "runnel/actors/exec/runtime.hpp"

namespace runnel::testing {

namespace fs = std::filesystem;

inline fs::path scratch(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("runnel-mp-" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

/// A runnel-node child process; killed (SIGKILL) if still running when destroyed.
class node_process {
public:
  /// `max_fds` > 0: the child's descriptor limit (soft and hard).
  node_process(const std::string& cluster, const std::string& job, int task, const fs::path& dir,
               std::vector<std::string> extra = {}, int max_fds = 0) {
    port_file_ = dir / (job + std::to_string(task) + ".port");
    log_ = dir / (job + std::to_string(task) + ".log");
    fs::remove(port_file_);
    std::vector<std::string> args = {RUNNEL_NODE_BINARY, "--cluster", cluster, "--job", job,
                                     "--task", std::to_string(task), "--port-file",
                                     port_file_.string(), "--startup-timeout", "5"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      std::FILE* f = std::freopen(log_.c_str(), "a", stderr);
      (void)f;
      if (max_fds > 0) {
        rlimit r{rlim_t(max_fds), rlim_t(max_fds)};
        ::setrlimit(RLIMIT_NOFILE, &r);
      }
      std::vector<char*> argv;
      for (auto& a : args)
        argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~node_process() {
    if (pid_ > 0 && running()) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  /// Waits until it serves (its port file appears).
  bool wait_ready(std::chrono::seconds limit = std::chrono::seconds(30)) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (fs::exists(port_file_))
        return true;
      if (!running())
        return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  bool running() {
    if (exited_)
      return false;
    int st;
    pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      status_ = st;
      return false;
    }
    return true;
  }
  void kill(int sig) { ::kill(pid_, sig); }
  /// SIGSTOP, returning once the process has stopped (a signal is delivered asynchronously: a
  /// step started right after kill() could still be served).
  void stop() {
    ::kill(pid_, SIGSTOP);
    int st = 0;
    ::waitpid(pid_, &st, WUNTRACED);
  }
  /// Exit status after it stops (waits up to `limit`), or -1.
  int wait_exit(std::chrono::seconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (running() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (running())
      return -1;
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
  }
  std::string log() const {
    std::ifstream in(log_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

private:
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
  fs::path port_file_, log_;
};

inline runtime& client_runtime() {
  static runtime* rt = new runtime; // never destroyed: see tests/eval.hpp
  return *rt;
}

} // namespace runnel::testing
