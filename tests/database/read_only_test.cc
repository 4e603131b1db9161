// Opening for lookup writes nothing, not even the -wal and -shm files SQLite
// makes to read a WAL-mode file, so that a database in a folder the reader
// cannot write (shipped in a system folder) can be read; and a read-only
// handle still sees what writers commit before and after it opened.

#include "test_util.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <set>
#include <sstream>

namespace kiln::db {
namespace {

using namespace kiln::db::testing;

std::set<std::string> names_in(const std::filesystem::path &dir) {
  std::set<std::string> names;
  for (const auto &entry : std::filesystem::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

class ReadOnly : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = Database::open(path, OpenMode::kCreate);
    db.commit({ok_record(1, kSkylake, trace("fast"), {1e-3}), ok_record(1, kSkylake, trace("slow"), {2e-3}),
               error_record(1, kSkylake, trace("bad"), ErrorKind::kBuildError, "no")});
  }  // Closing the last connection folds the log into the file and deletes it.
  TempDir dir;
  std::filesystem::path path = dir / "t.kdb";
  std::string w1 = workload(1).key_hash;
};

TEST_F(ReadOnly, LookupsCreateNoLogFilesAndLeaveTheFileAlone) {
  // A WAL-mode file (header bytes 18 and 19 are 2) alone in its folder: what a
  // database copied or shipped elsewhere looks like.
  std::string bytes = read_bytes(path);
  ASSERT_EQ(bytes[18], 2);
  ASSERT_EQ(bytes[19], 2);
  std::set<std::string> names = names_in(path.parent_path());
  ASSERT_EQ(names, std::set<std::string>{"t.kdb"});
  auto modified = std::filesystem::last_write_time(path);
  {
    auto db = Database::open(path, OpenMode::kReadOnly);
    std::optional<Record> best = db.best(w1, kSkylake);
    ASSERT_TRUE(best);
    EXPECT_EQ(best->trace_json, trace("fast"));
    EXPECT_EQ(db.top_k(w1, kSkylake, 5).size(), 2u);
    EXPECT_EQ(db.records_of(w1).size(), 3u);
    EXPECT_EQ(db.stats().records, 3);
    std::ostringstream out;
    EXPECT_EQ(db.export_jsonl(out), 3u);
    EXPECT_EQ(names_in(path.parent_path()), names);  // no -wal or -shm while open
  }
  EXPECT_EQ(names_in(path.parent_path()), names);
  EXPECT_EQ(read_bytes(path), bytes);
  EXPECT_EQ(std::filesystem::last_write_time(path), modified);
}

TEST_F(ReadOnly, WorksInAFolderItCannotWrite) {
  // Root writes anywhere, so this only runs as another user; as root the test
  // above checks the same thing: no file is made beside the database.
  if (geteuid() == 0) GTEST_SKIP() << "root bypasses folder permissions";
  std::filesystem::path folder = dir / "shipped";
  std::filesystem::create_directory(folder);
  std::filesystem::copy_file(path, folder / "t.kdb");
  ASSERT_EQ(chmod(folder.c_str(), 0555), 0);
  std::optional<Record> best;
  std::string error =
      db_error_of([&] { best = Database::open(folder / "t.kdb", OpenMode::kReadOnly).best(w1, kSkylake); });
  chmod(folder.c_str(), 0755);
  EXPECT_EQ(error, "<no error>");
  ASSERT_TRUE(best);
  EXPECT_EQ(best->trace_json, trace("fast"));
}

TEST_F(ReadOnly, SeesWhatAWriterStillOpenHasCommitted) {
  auto writer = Database::open(path, OpenMode::kReadWrite);
  writer.commit({ok_record(1, kSkylake, trace("faster"), {0.5e-3})});  // in the log, not yet in the file
  ASSERT_TRUE(std::filesystem::exists(path.string() + "-wal"));
  auto reader = Database::open(path, OpenMode::kReadOnly);
  std::optional<Record> best = reader.best(w1, kSkylake);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->trace_json, trace("faster"));
}

TEST_F(ReadOnly, SeesWhatAWriterCommitsAfterItOpened) {
  auto reader = Database::open(path, OpenMode::kReadOnly);
  EXPECT_EQ(reader.best(w1, kSkylake)->trace_json, trace("fast"));
  auto writer = Database::open(path, OpenMode::kReadWrite);
  writer.commit({ok_record(1, kSkylake, trace("faster"), {0.5e-3})});
  EXPECT_EQ(reader.best(w1, kSkylake)->trace_json, trace("faster"));
  EXPECT_EQ(reader.stats().records, 4);
}

TEST_F(ReadOnly, SeesWhatAWriterThatCameAndWentCommitted) {
  auto reader = Database::open(path, OpenMode::kReadOnly);
  EXPECT_EQ(reader.best(w1, kSkylake)->trace_json, trace("fast"));
  {
    auto writer = Database::open(path, OpenMode::kReadWrite);
    writer.commit({ok_record(1, kSkylake, trace("faster"), {0.5e-3})});
  }
  // The writer folded its log into the file and deleted it: only the file changed.
  ASSERT_FALSE(std::filesystem::exists(path.string() + "-wal"));
  EXPECT_EQ(reader.best(w1, kSkylake)->trace_json, trace("faster"));
  EXPECT_EQ(reader.stats().records, 4);
}

// What opening `path` to write says, from a process of an unprivileged user (root
// writes anywhere): nullopt when this process cannot become one.
std::optional<std::string> write_open_error_as_unprivileged_user(const std::filesystem::path &path) {
  int fds[2];
  if (pipe(fds) != 0) return std::nullopt;
  pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(77);
    std::string error = db_error_of([&] { Database::open(path, OpenMode::kReadWrite); });
    ssize_t written = write(fds[1], error.data(), error.size());
    _exit(written == static_cast<ssize_t>(error.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string error;
  char buffer[4096];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) error.append(buffer, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return error;
}

// Opening to write (what tuning does before it measures anything) refuses a file it
// cannot write, or one in a folder where SQLite cannot make its log: SQLite alone opens
// such a file read-only and the first commit fails, after a round of measurements.
TEST(ReadOnlyErrors, OpeningToWriteWhatCannotBeWrittenFailsAtOnce) {
  TempDir dir;
  std::filesystem::path folder = dir / "shared";
  std::filesystem::create_directory(folder);
  std::filesystem::path path = folder / "t.kdb";
  { Database::open(path, OpenMode::kCreate).commit({ok_record(1, kSkylake, trace("a"), {1e-3})}); }
  ASSERT_EQ(chmod((dir / "").c_str(), 0755), 0);
  const std::string what_to_do = "make both writable, or give another database file";

  ASSERT_EQ(chmod(folder.c_str(), 0777), 0);
  ASSERT_EQ(chmod(path.c_str(), 0444), 0);
  std::optional<std::string> error = write_open_error_as_unprivileged_user(path);
  if (!error) GTEST_SKIP() << "cannot run as an unprivileged user here";
  EXPECT_EQ(error->rfind("database " + path.string() + " is read-only here; opening it to store records", 0), 0u)
      << *error;
  EXPECT_NE(error->find(what_to_do), std::string::npos) << *error;

  // A writable file in a folder where its log cannot be made (none is there yet).
  std::filesystem::remove(path.string() + "-wal");
  std::filesystem::remove(path.string() + "-shm");
  ASSERT_EQ(chmod(path.c_str(), 0666), 0);
  ASSERT_EQ(chmod(folder.c_str(), 0555), 0);
  error = write_open_error_as_unprivileged_user(path);
  chmod(folder.c_str(), 0755);
  ASSERT_TRUE(error);
  EXPECT_NE(error->find(path.string()), std::string::npos) << *error;
  EXPECT_NE(error->find(what_to_do), std::string::npos) << *error;
}

TEST(ReadOnlyErrors, NameTheFileAndWhatToDo) {
  TempDir dir;
  std::filesystem::path missing = dir / "missing.kdb";
  EXPECT_EQ(db_error_of([&] { Database::open(missing, OpenMode::kReadOnly); }),
            "database " + missing.string() + " does not exist; check the path (opening for lookup never creates one)");

  std::filesystem::path junk = dir / "junk.kdb";
  std::ofstream(junk, std::ios::binary) << std::string(4096, 'x');
  std::string error = db_error_of([&] { Database::open(junk, OpenMode::kReadOnly); });
  EXPECT_EQ(error, "file " + junk.string() +
                       " is not a Kiln database or is corrupt: it is not an SQLite file; check the path, or "
                       "restore it from a backup or an export");
}

}  // namespace
}  // namespace kiln::db
