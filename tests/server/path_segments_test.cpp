// Percent-encoded path segments: an encoded '/' (or NUL, '\', a control character) must never
// change the route or reach the store as part of an id. Raw requests, so that nothing between
// the test and the server normalizes the path. Each test waits on the server's answer.
#include <gtest/gtest.h>

#include "raw_socket.hpp"
#include "test_util.hpp"

namespace perseus::server::testing {
namespace {

/// One raw request on a fresh connection; returns the status and the parsed JSON body.
Resp raw_request(int port, const std::string& method, const std::string& path, const std::string& body = "",
                 bool auth = true) {
  RawConn c(port);
  std::string head = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (auth) head += "Authorization: Bearer " + kToken + "\r\n";
  if (!body.empty() || method == "POST")
    head += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  EXPECT_TRUE(c.send(head + "\r\n" + body)) << method << " " << path;
  const std::string resp = c.read_response();
  Resp out;
  out.status = raw_status(resp);
  out.body = raw_body(resp);
  out.j = json::parse(out.body, nullptr, false);
  if (out.j.is_discarded()) out.j = nullptr;
  return out;
}

/// Expects 400 invalid_path whose message contains every string of `needles`.
void expect_invalid_path(const Resp& r, const std::vector<std::string>& needles, const std::string& what) {
  EXPECT_EQ(r.status, 400) << what << ": " << r.body;
  ASSERT_TRUE(r.j.is_object()) << what << ": body is not JSON: " << r.body;
  const json err = r.j.contains("error") && r.j["error"].is_object() ? r.j["error"] : json::object();
  EXPECT_EQ(err.value("code", ""), "invalid_path") << what << ": " << r.body;
  const std::string msg = err.value("message", "");
  for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << what << ": no \"" << n << "\" in: " << msg;
}

const json kRank0 = {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0}};

class PathSegments : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir = new TempDir();
    ServerOptions opt;
    opt.max_body_bytes = 1 << 20;
    opt.zeus_plan_texts = {"[[1410, 1410], [1200, 1200]]"};  // pp 2, 1 microbatch
    srv = new LocalServer(dir->file("p.db"), opt);
    Api api(srv->port());
    auto r = api.post("/v1/jobs", profile_job(1, 8));
    ASSERT_EQ(r.status, 201) << r.body;
    job = r.j["job_id"];
    r = api.post("/register_job", {{"job_id", ""}, {"pp_degree", 2}, {"dp_degree", 1}, {"tp_degree", 1}, {"world_size", 2}});
    ASSERT_EQ(r.status, 200) << r.body;
    zjob = r.j.get<std::string>();
  }
  static void TearDownTestSuite() {
    delete srv;
    delete dir;
  }
  static int ranks_registered(const std::string& id) {
    Api api(srv->port());
    return api.get("/v1/jobs/" + id).j.value("ranks_registered", -1);
  }
  static inline TempDir* dir = nullptr;
  static inline LocalServer* srv = nullptr;
  static inline std::string job, zjob;
};

// Before the fix, libmicrohttpd decoded the whole path before routing: "J%2Franks" became
// "J/ranks" and this POST registered rank 0 of job J (201).
TEST_F(PathSegments, EncodedSlashInJobIdIsRefusedAndRegistersNothing) {
  for (const char* slash : {"%2F", "%2f"}) {
    const Resp r = raw_request(srv->port(), "POST", "/v1/jobs/" + job + slash + "ranks", kRank0.dump());
    expect_invalid_path(r, {"job_id", "'/'", "job-", "24 hex digits"}, slash);
  }
  EXPECT_EQ(ranks_registered(job), 0) << "a refused request registers nothing";
  // A Zeus route the same way.
  const Resp z = raw_request(srv->port(), "POST", "/register_rank" "%2F" + zjob, kRank0.dump());
  expect_invalid_path(z, {"'/'"}, "zeus literal segment");
  expect_invalid_path(raw_request(srv->port(), "POST", "/register_rank/" + zjob + "%2Fx", kRank0.dump()),
                      {"job_id", "'/'"}, "zeus job id");
}

// Before the fix, "%00" cut the path at the NUL: "DELETE /v1/jobs/J%00/stragglers/0" (clear a
// straggler) became "DELETE /v1/jobs/J" and deleted the job.
TEST_F(PathSegments, EncodedNulIsRefusedAndDeletesNothing) {
  const Resp r = raw_request(srv->port(), "DELETE", "/v1/jobs/" + job + "%00/stragglers/0");
  expect_invalid_path(r, {"job_id", "NUL", "\\x00"}, "nul");
  Api api(srv->port());
  EXPECT_EQ(api.get("/v1/jobs/" + job).status, 200) << "the job is still there";
}

// A raw NUL (not "%00") reached the router as the end of a C string: the same request deleted
// the job (session 16's trial).
TEST_F(PathSegments, RawNulInThePathIsRefusedAndDeletesNothing) {
  const std::string nul(1, '\0');
  const Resp r = raw_request(srv->port(), "DELETE", "/v1/jobs/" + job + nul + "/stragglers/0");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("raw NUL"), std::string::npos) << r.body;
  Api api(srv->port());
  EXPECT_EQ(api.get("/v1/jobs/" + job).status, 200) << "the job is still there";
  // What a NUL-free request line may look like: an empty query, a query.
  EXPECT_EQ(raw_request(srv->port(), "GET", "/v1/jobs/" + job + "?").status, 200);
  EXPECT_NE(raw_request(srv->port(), "GET", "/v1/jobs/" + job + "/ranks/0/plan?since_version=1").status, 400);
  EXPECT_NE(raw_request(srv->port(), "GET", "/v1/jobs/" + job + "/ranks/0/plan?since_version=1&").status, 400);
  // A raw NUL inside the query cut it there: "since_version=1<NUL>junk" was read as 1.
  for (const std::string& query : {"since_version=1" + nul + "junk", "since_version" + nul + "=1"}) {
    const Resp q = raw_request(srv->port(), "GET", "/v1/jobs/" + job + "/ranks/0/plan?" + query);
    EXPECT_EQ(q.status, 400) << q.body;
    EXPECT_NE(q.body.find("query holds a raw NUL byte"), std::string::npos) << q.body;
  }
}

// A raw NUL inside a header value: libmicrohttpd ends the value there, so "Authorization:
// Bearer TOKEN<NUL>junk" authenticated as TOKEN. Refused with 400 invalid_header, wherever the
// header stands; the same request without the NUL, or with bare-LF line ends, still works.
TEST_F(PathSegments, RawNulInAHeaderValueIsRefused) {
  const std::string nul(1, '\0'), path = "/v1/jobs/" + job;
  auto send = [&](const std::string& head) {
    RawConn c(srv->port());
    EXPECT_TRUE(c.send(head));
    const std::string resp = c.read_response();
    return std::pair{raw_status(resp), raw_body(resp)};
  };
  const std::string auth = "Authorization: Bearer " + kToken;
  for (const auto& head :
       {"GET " + path + " HTTP/1.1\r\nHost: x\r\n" + auth + nul + "junk\r\nConnection: close\r\n\r\n",
        "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + auth + nul + "junk\r\n\r\n",
        "GET " + path + " HTTP/1.1\r\nHost: x\r\n" + auth + "\r\nX-Note: a" + nul + "b\r\nConnection: close\r\n\r\n"}) {
    const auto [status, body] = send(head);
    EXPECT_EQ(status, 400) << body;
    EXPECT_NE(body.find("invalid_header"), std::string::npos) << body;
    EXPECT_NE(body.find("holds a NUL byte"), std::string::npos) << body;
  }
  EXPECT_EQ(send("GET " + path + " HTTP/1.1\r\nHost: x\r\n" + auth + "\r\nConnection: close\r\n\r\n").first, 200);
  EXPECT_EQ(send("GET " + path + " HTTP/1.1\nHost: x\n" + auth + "\nConnection: close\n\n").first, 200);
}

TEST_F(PathSegments, OtherCharactersOutsideTheIdRuleAreRefused) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"job%5Cx", "'\\'"},            // backslash
      {"job%0Ax", "\\x0a"},           // newline (would also have split the access log line)
      {"job%7Fx", "\\x7f"},           // DEL
      {"%2E%2E", "\"..\""},           // dot segments are not ids
      {"job%20x", "\"job x\""},       // space
      {"j%C3%A9", "\\xc3\\xa9"},      // non-ASCII
      {"job.x", "\"job.x\""},         // literally outside the rule, no encoding at all
      {std::string(300, 'a'), "1 to 128 characters"},
  };
  for (const auto& [seg, shown] : cases) {
    const Resp r = raw_request(srv->port(), "GET", "/v1/jobs/" + seg);
    expect_invalid_path(r, {"job_id", shown, "A-Z a-z 0-9 '-' '_'"}, seg.substr(0, 20));
  }
}

TEST_F(PathSegments, MalformedEscapesAreRefused) {
  for (const std::string& path : std::vector<std::string>{"/v1/jobs/job%zz", "/v1/jobs/job%4", "/v1/jobs/job%", "/v1%2", "/v1/jobs/" + job + "/ranks/%G0/plan"}) {
    const Resp r = raw_request(srv->port(), "GET", path);
    expect_invalid_path(r, {"percent", "%HH"}, path);
  }
}

// The check is on the decoded value: an id whose allowed characters are percent-encoded is the id.
TEST_F(PathSegments, EncodedAllowedCharactersAreDecoded) {
  std::string encoded = job;
  encoded.replace(encoded.find('-'), 1, "%2D");
  encoded.replace(0, 1, "%6A");  // 'j'
  const Resp r = raw_request(srv->port(), "GET", "/v1/jobs/" + encoded);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j.value("job_id", ""), job);
  // A well-formed id that is no job is still 404 unknown_job.
  const Resp u = raw_request(srv->port(), "GET", "/v1/jobs/job-000000000000000000000000");
  EXPECT_EQ(u.status, 404) << u.body;
  EXPECT_NE(u.body.find("unknown_job"), std::string::npos) << u.body;
  // Query arguments are decoded as before: %31 is 1, %30 is 0.
  Api api(srv->port());
  ASSERT_EQ(api.post("/register_rank/" + zjob, kRank0).status, 200);
  const Resp s = raw_request(srv->port(), "GET", "/schedule/" + zjob + "?rank=%30");
  EXPECT_EQ(s.status, 200) << s.body;
  EXPECT_EQ(s.j.value("rank", -1), 0);
}

// Integer segments (rank, pipeline) are checked with the route, before the body is read: a
// declared 1 MiB body is never read.
TEST_F(PathSegments, BadIntegerSegmentRefusedBeforeTheBody) {
  RawConn c(srv->port());
  ASSERT_TRUE(c.send("POST /v1/jobs/" + job + "/ranks/0%2F1/measurements HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                     kToken + "\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"));
  const std::string resp = c.read_response();
  EXPECT_EQ(raw_status(resp), 400) << resp;
  EXPECT_NE(raw_body(resp).find("rank"), std::string::npos) << resp;
  EXPECT_NE(raw_body(resp).find("'/'"), std::string::npos) << resp;
  EXPECT_TRUE(c.wait_closed()) << "the unread body is never read: the connection closes";
  expect_invalid_path(raw_request(srv->port(), "DELETE", "/v1/jobs/" + job + "/stragglers/x"),
                      {"pipeline", "non-negative integer"}, "pipeline");
}

// The path check is syntax: it answers before authentication (a client without a token learns
// nothing about jobs from it).
TEST_F(PathSegments, CheckedBeforeAuthentication) {
  const Resp r = raw_request(srv->port(), "GET", "/v1/jobs/" + job + "%2Franks", "", /*auth=*/false);
  expect_invalid_path(r, {"job_id"}, "no token");
  EXPECT_EQ(raw_request(srv->port(), "GET", "/v1/jobs/" + job, "", /*auth=*/false).status, 401);
}

// An absolute-form request target (RFC 9112 §3.2.2: a server MUST accept it; proxies send it)
// is routed by its path; it was 404 "no such route" (session 27's trial).
TEST_F(PathSegments, AbsoluteFormTargetsAreRoutedByTheirPath) {
  const std::string port = std::to_string(srv->port());
  for (const std::string& prefix : {"http://127.0.0.1:" + port, std::string("HTTP://localhost"), std::string("https://x")}) {
    const Resp r = raw_request(srv->port(), "GET", prefix + "/v1/jobs/" + job);
    EXPECT_EQ(r.status, 200) << prefix << ": " << r.body;
  }
  EXPECT_EQ(raw_request(srv->port(), "GET", "http://127.0.0.1:" + port + "/v1/jobs/" + job + "/ranks/01/plan").status,
            400) << "the path is checked as usual";
}

// One spelling per index: "01" is not rank 1 (two URLs for one resource confuse caches, logs and
// access rules), in a path segment or a query parameter.
TEST_F(PathSegments, LeadingZerosAreRefused) {
  expect_invalid_path(raw_request(srv->port(), "GET", "/v1/jobs/" + job + "/ranks/01/plan"),
                      {"rank", "leading zeros", "01"}, "rank 01");
  // A query parameter's error is invalid_query (it was invalid_path; session 27's trial).
  const Resp q = raw_request(srv->port(), "GET", "/v1/jobs/" + job + "/ranks/0/plan?since_version=007");
  EXPECT_EQ(q.status, 400) << q.body;
  EXPECT_EQ(q.j["error"].value("code", ""), "invalid_query") << q.body;
  EXPECT_NE(q.j["error"].value("message", "").find("since_version\" must be a non-negative integer without leading "
                                                   "zeros"), std::string::npos) << q.body;
  const Resp plus = raw_request(srv->port(), "GET", "/v1/jobs/" + job + "/ranks/0/plan?since_version=+3");
  EXPECT_EQ(plus.j["error"].value("code", ""), "invalid_query") << plus.body;
  EXPECT_NE(plus.j["error"].value("message", "").find("(a '+' in a query reads as a space)"), std::string::npos)
      << plus.body;
  expect_invalid_path(raw_request(srv->port(), "GET", "/v1/jobs/" + job + "/ranks/%31/plan"),
                      {"rank", "percent-encoded"}, "rank %31");
  EXPECT_NE(raw_request(srv->port(), "GET", "/v1/jobs/" + job + "/ranks/0/plan").status, 400) << "rank 0 is fine";
}

// A query parameter given twice is refused (it would otherwise be read as its first value).
TEST_F(PathSegments, RepeatedOrTooManyQueryParametersAreRefused) {
  Resp r = raw_request(srv->port(), "GET", "/v1/jobs/" + job + "/ranks/0/plan?since_version=1&since_version=2");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.j["error"].value("code", ""), "invalid_query") << r.body;
  EXPECT_NE(r.j["error"].value("message", "").find("since_version"), std::string::npos) << r.body;
  std::string many = "/v1/health?";
  for (int i = 0; i < 70; ++i) many += "k" + std::to_string(i) + "=1&";
  r = raw_request(srv->port(), "GET", many);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("more than 64 query parameters"), std::string::npos) << r.body;
  // Hundreds of arguments within the header limit: each took connection memory as it was
  // split, the connection ran out and the request was never answered (the client waited for the
  // idle timeout). Empty arguments count too: "&&&..." was split into as many.
  for (const int n : {300, 2000}) {
    std::string query;
    for (int i = 0; i < n; ++i) query += "k" + std::to_string(i) + "=1&";
    for (const std::string& target : {"/v1/health?" + query, "/v1/jobs/" + job + "/ranks/0/plan?" + query,
                                      "/v1/health?" + std::string(static_cast<std::size_t>(n), '&')}) {
      r = raw_request(srv->port(), "GET", target);
      EXPECT_EQ(r.status, 400) << n << " arguments: " << r.body;
      EXPECT_EQ(r.j["error"].value("code", ""), "invalid_query") << r.body;
      EXPECT_NE(r.body.find("more than 64 query parameters"), std::string::npos) << r.body;
    }
  }
  EXPECT_EQ(raw_request(srv->port(), "GET", "/v1/health?&&").status, 200) << "a few empty arguments are no parameters";
}

// A query parameter a route does not take is refused, never ignored: "?sinceversion=4" (a typo)
// was answered 200 with the whole plan at every poll (session 17's trial).
TEST_F(PathSegments, UnknownQueryParametersAreRefused) {
  Resp r = raw_request(srv->port(), "GET", "/v1/jobs/" + job + "/ranks/0/plan?sinceversion=4");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.j["error"].value("code", ""), "invalid_query") << r.body;
  EXPECT_EQ(r.j["error"].value("message", ""), "unknown query parameter 'sinceversion'; this route takes since_version")
      << r.body;
  r = raw_request(srv->port(), "GET", "/v1/jobs/" + job + "?verbose=1");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("unknown query parameter 'verbose'; this route takes pipelines_from, pipelines_count"),
            std::string::npos) << r.body;
  r = raw_request(srv->port(), "GET", "/v1/jobs?verbose=1");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("this route takes no query parameters"), std::string::npos) << r.body;
  // (404 here: no rank is registered in this fixture; not a query error.)
  EXPECT_EQ(raw_request(srv->port(), "GET", "/v1/jobs/" + job + "/ranks/0/plan?since_version=0").status, 404);
  EXPECT_EQ(raw_request(srv->port(), "GET", "/v1/jobs/" + job).status, 200);
  // An empty pair is no parameter, wherever it stands; an empty key with a value is one.
  EXPECT_EQ(raw_request(srv->port(), "GET", "/v1/jobs/" + job + "?&").status, 200);
  EXPECT_EQ(raw_request(srv->port(), "GET", "/v1/jobs/" + job + "/ranks/0/plan?&since_version=0&").status, 404);
  EXPECT_EQ(raw_request(srv->port(), "GET", "/v1/jobs/" + job + "?=1").status, 400);
}

// HEAD is GET without the body (load balancers probe health with it); 405s list it.
TEST_F(PathSegments, HeadAnswersLikeGetWithoutABody) {
  RawConn c(srv->port());
  ASSERT_TRUE(c.send("HEAD /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  std::string resp;
  char buf[4096];
  for (ssize_t n; (n = ::recv(c.fd(), buf, sizeof buf, 0)) > 0;) resp.append(buf, static_cast<std::size_t>(n));
  EXPECT_EQ(raw_status(resp), 200) << resp;
  const auto end = resp.find("\r\n\r\n");
  ASSERT_NE(end, std::string::npos) << resp;
  EXPECT_EQ(resp.size(), end + 4) << "a HEAD response has no body: " << resp;
  const Resp r = raw_request(srv->port(), "PUT", "/v1/health");
  EXPECT_EQ(r.status, 405) << r.body;
  EXPECT_NE(r.body.find("GET, HEAD"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace perseus::server::testing
