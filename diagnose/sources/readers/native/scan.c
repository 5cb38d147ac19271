/* The bulk scanner's inner loop: one pass over a block of whole lines, in C.
 *
 * It classifies every line exactly as the Python reader does (scanner.segments, and through it
 * as the line-by-line parsers do): unreadable (invalid UTF-8 or a NUL byte), engine request line,
 * uvicorn access line, or another line, which is handed to Python when it holds one of the
 * scanner's keywords. Access and request lines -- nearly all of a busy server's log -- are only
 * counted here; Python gets back counts, a few evidence rows, and the keys of prompt heads
 * (CRC-32 and Adler-32 of the same bytes, so both readers key prompts alike).
 *
 * Where C cannot be sure of what Python's Unicode-aware regex would say (a non-ASCII or control
 * byte inside an access line's match), the line is left to Python as an ordinary line.
 *
 * No Python API: loaded with ctypes, which releases the GIL for the call, so blocks are scanned
 * on every core while Python parses the few lines that matter. Built when the package is built
 * (build.py, run by hatch_build.py at `pip install`), never when diagnose runs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* x86-64: faster paths for CPUs that have AVX2 and PCLMULQDQ, chosen at run time (the library may
 * be built on one machine of a cluster and loaded on another). DIAGNOSE_NO_AVX2 set: never taken. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define X86_DISPATCH 1
static int use_avx2, use_clmul;
#endif

#define NSTATUS 1000
#define ROW_WIDTH 5         /* kind, line index in the block, start, end, status */
enum { ROW_KEYWORD = 0, ROW_PROBE = 1, ROW_HTTP = 2, ROW_RECEIVED = 3 };

typedef struct {
    int64_t lines, bad, acc, req, rcv, probe;
    int64_t status[NSTATUS];
    int64_t kept[NSTATUS];          /* evidence rows given per error status, this block */
    int64_t kept_probe, kept_rcv;
    int64_t refused;                /* 503/429 answered to a request, not to a probe (engines.common) */
    int64_t stats;                  /* engine stats lines read here (dg_stats_line), this segment */
} dg_totals;

/* ---- lists set once from Python (scanner.GREP_KEYWORDS, engines.common.PROBE_PATHS) ---- */

#define MAX_WORDS 256
#define WORD_BYTES 8192
static uint8_t word_store[WORD_BYTES];
static const uint8_t *kw[MAX_WORDS];
static int kw_len[MAX_WORDS], kw_next[MAX_WORDS], n_kw;
static int16_t pair_head[65536];    /* keywords by their first two bytes: a cheap reject */
static const uint8_t *probe[MAX_WORDS];
static int probe_len[MAX_WORDS], n_probe;

/* zlib's CRC-32, eight bytes a step: the key of a prompt head is crc32 << 32 | adler32, which
 * Python computes with zlib for the same bytes (engines.common.head_key). */
static uint32_t crc_table[8][256];

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

/* adler32 as two independent sums the compiler vectorises: a = 1 + sum s[i],
 * b = n + sum (n - i) s[i]; with n <= 256 neither comes near overflow before the modulo. */
#define ADLER_SUMS(s, n, a, b) do { \
    uint32_t sum_ = 0, weighted_ = 0; \
    for (int64_t i_ = 0; i_ < (n); i_++) { sum_ += (s)[i_]; weighted_ += (uint32_t)i_ * (s)[i_]; } \
    a = (1 + sum_) % 65521u; \
    b = ((uint32_t)(n) + (uint32_t)(n) * sum_ - weighted_) % 65521u; \
} while (0)

static uint32_t crc_tail(uint32_t c, const uint8_t *s, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint32_t lo, hi;
        memcpy(&lo, s + i, 4);
        memcpy(&hi, s + i + 4, 4);
        lo ^= c;
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^ crc_table[5][(lo >> 16) & 0xFF] ^
            crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF] ^
            crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
    }
    for (; i < n; i++) c = crc_table[0][(c ^ s[i]) & 0xFF] ^ (c >> 8);
    return c;
}

static uint64_t head_key(const uint8_t *s, int64_t n)
{
    uint32_t a, b;
    ADLER_SUMS(s, n, a, b);
    uint32_t c = crc_tail(0xFFFFFFFFu, s, n) ^ 0xFFFFFFFFu;
    return ((uint64_t)c << 32) | (b << 16 | a);
}

#ifdef X86_DISPATCH
/* The same key where the CPU has AVX2 (wider sums) and PCLMULQDQ: CRC-32 folded 64 bytes a step
 * by carry-less multiplication (Intel's "Fast CRC Computation for Generic Polynomials Using
 * PCLMULQDQ", with the bit-reflected constants of zlib's polynomial, as zlib-ng and Chromium do). */
__attribute__((target("avx2,pclmul,sse4.1")))
static uint32_t crc_clmul(uint32_t crc, const uint8_t *buf, int64_t len)   /* len >= 64, a multiple of 16 */
{
    const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4);
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0);
    const __m128i k5k0 = _mm_set_epi64x(0, 0x0163cd6124);
    const __m128i poly = _mm_set_epi64x(0x01f7011641, 0x01db710641);
    __m128i x0, x1, x2, x3, x4, x5, x6, x7, x8;
    x1 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
    x2 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
    x3 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
    x4 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
    x0 = k1k2;
    buf += 64;
    len -= 64;
    while (len >= 64) {
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x6 = _mm_clmulepi64_si128(x2, x0, 0x00);
        x7 = _mm_clmulepi64_si128(x3, x0, 0x00);
        x8 = _mm_clmulepi64_si128(x4, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x2 = _mm_clmulepi64_si128(x2, x0, 0x11);
        x3 = _mm_clmulepi64_si128(x3, x0, 0x11);
        x4 = _mm_clmulepi64_si128(x4, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), _mm_loadu_si128((const __m128i *)(buf + 0x00)));
        x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), _mm_loadu_si128((const __m128i *)(buf + 0x10)));
        x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), _mm_loadu_si128((const __m128i *)(buf + 0x20)));
        x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), _mm_loadu_si128((const __m128i *)(buf + 0x30)));
        buf += 64;
        len -= 64;
    }
    /* four lanes into one */
    x0 = k3k4;
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x3), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x4), x5);
    while (len >= 16) {
        x2 = _mm_loadu_si128((const __m128i *)buf);
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
        buf += 16;
        len -= 16;
    }
    /* 128 bits to 64, then Barrett reduction to 32 */
    x2 = _mm_clmulepi64_si128(x1, x0, 0x10);
    x3 = _mm_setr_epi32(~0, 0, ~0, 0);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2);
    x0 = k5k0;
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_and_si128(x1, x3);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    x0 = poly;
    x2 = _mm_and_si128(x1, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x10);
    x2 = _mm_and_si128(x2, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}

__attribute__((target("avx2,pclmul,sse4.1")))
static uint64_t head_key_clmul(const uint8_t *s, int64_t n)
{
    uint32_t a, b, c = 0xFFFFFFFFu;
    ADLER_SUMS(s, n, a, b);
    int64_t m = n >= 64 ? n & ~(int64_t)15 : 0;
    if (m) c = crc_clmul(c, s, m);
    c = crc_tail(c, s + m, n - m) ^ 0xFFFFFFFFu;
    return ((uint64_t)c << 32) | (b << 16 | a);
}
#define HEAD_KEY(s, n) (use_clmul ? head_key_clmul(s, n) : head_key(s, n))
#else
#define HEAD_KEY(s, n) head_key(s, n)
#endif

/* `blob`: words separated by NUL bytes. Returns 0, or -1 when a list does not fit. */
int dg_setup(const uint8_t *keywords, int64_t kn, const uint8_t *probes, int64_t pn)
{
    int64_t used = 0;
    if (kn + pn > WORD_BYTES) return -1;
    crc_init();
#ifdef X86_DISPATCH
    __builtin_cpu_init();
    use_avx2 = __builtin_cpu_supports("avx2") && !getenv("DIAGNOSE_NO_AVX2");
    use_clmul = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("pclmul") &&
                __builtin_cpu_supports("sse4.1") && !getenv("DIAGNOSE_NO_AVX2");
#endif
    memcpy(word_store, keywords, kn);
    memcpy(word_store + kn, probes, pn);
    for (int i = 0; i < 65536; i++) pair_head[i] = -1;
    n_kw = n_probe = 0;
    for (int64_t i = 0; i < kn; ) {
        int64_t j = i;
        while (j < kn && word_store[j]) j++;
        if (j - i < 2 || n_kw == MAX_WORDS) return -1;   /* the pair table needs two bytes */
        int p = word_store[i] | (word_store[i + 1] << 8);
        kw[n_kw] = word_store + i; kw_len[n_kw] = (int)(j - i);
        kw_next[n_kw] = pair_head[p]; pair_head[p] = (int16_t)n_kw;
        n_kw++;
        i = j + 1;
    }
    used = kn;
    for (int64_t i = 0; i < pn; ) {
        int64_t j = i;
        while (j < pn && word_store[used + j]) j++;
        if (j == i || n_probe == MAX_WORDS) return -1;
        probe[n_probe] = word_store + used + i; probe_len[n_probe] = (int)(j - i);
        n_probe++;
        i = j + 1;
    }
    return 0;
}

/* ---- per-line tests ---- */

/* Strict UTF-8 as Python decodes it (no overlongs, surrogates or code points past U+10FFFF),
 * and no NUL byte. */
static int readable(const uint8_t *s, int64_t n)
{
    int64_t i = 0;
    while (i < n) {
        while (i + 8 <= n) {        /* ASCII eight bytes at a time */
            uint64_t w;
            memcpy(&w, s + i, 8);
            if ((w & 0x8080808080808080ULL) ||
                ((w - 0x0101010101010101ULL) & ~w & 0x8080808080808080ULL))
                break;
            i += 8;
        }
        if (i >= n) break;
        uint8_t c = s[i];
        if (c < 0x80) {
            if (!c) return 0;
            i++;
            continue;
        }
        int k;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) { k = 1; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { k = 2; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { k = 3; cp = c & 0x07; }
        else return 0;
        if (i + k >= n) return 0;       /* cut short by the line's end */
        for (int j = 1; j <= k; j++) {
            uint8_t d = s[i + j];
            if ((d & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (d & 0x3F);
        }
        if (k == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return 0;
        if (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)) return 0;
        i += k + 1;
    }
    return 1;
}

/* The end of the line that starts at s (its newline, or `end`), and whether it is readable: one
 * pass finds the newline and notes any NUL or non-ASCII byte; only such lines get the full check. */
#ifdef __SSE2__
#include <emmintrin.h>
/* A vector step found the newline: bit `m_nl` of the step at p; m_odd marks NUL and non-ASCII. */
static inline const uint8_t *line_hit(const uint8_t *s, const uint8_t *p, unsigned m_nl, unsigned m_odd,
                                      int odd, int *ok)
{
    odd |= (m_odd & ((m_nl & -m_nl) - 1)) != 0;
    *ok = !odd || readable(s, p + __builtin_ctz(m_nl) - s);
    return p + __builtin_ctz(m_nl);
}

/* From p on (s: the line's start; odd: whether s..p held such a byte), 16 bytes a step. */
static const uint8_t *line_end_from(const uint8_t *s, const uint8_t *p, const uint8_t *end, int odd, int *ok)
{
    const __m128i nl = _mm_set1_epi8('\n'), zero = _mm_setzero_si128();
    while (end - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)p);
        unsigned m_nl = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, nl));
        unsigned m_odd = (unsigned)(_mm_movemask_epi8(x) | _mm_movemask_epi8(_mm_cmpeq_epi8(x, zero)));
        if (m_nl) return line_hit(s, p, m_nl, m_odd, odd, ok);
        odd |= m_odd != 0;
        p += 16;
    }
    while (p < end && *p != '\n') {
        odd |= *p == 0 || *p >= 0x80;
        p++;
    }
    *ok = !odd || readable(s, p - s);
    return p;
}

static const uint8_t *line_end(const uint8_t *s, const uint8_t *end, int *ok)
{
    return line_end_from(s, s, end, 0, ok);
}
#else
static const uint8_t *line_end(const uint8_t *s, const uint8_t *end, int *ok)
{
    const uint8_t *e = memchr(s, '\n', end - s);
    if (!e) e = end;
    *ok = readable(s, e - s);
    return e;
}
#endif

/* The same, 32 bytes a step (AVX2); the last few bytes go the 16-byte way. */
#ifdef X86_DISPATCH
__attribute__((target("avx2")))
static const uint8_t *line_end_avx2(const uint8_t *s, const uint8_t *end, int *ok)
{
    const __m256i nl = _mm256_set1_epi8('\n'), zero = _mm256_setzero_si256();
    const uint8_t *p = s;
    int odd = 0;
    while (end - p >= 32) {
        __m256i x = _mm256_loadu_si256((const __m256i *)p);
        unsigned m_nl = (unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, nl));
        unsigned m_odd = (unsigned)(_mm256_movemask_epi8(x) | _mm256_movemask_epi8(_mm256_cmpeq_epi8(x, zero)));
        if (m_nl) return line_hit(s, p, m_nl, m_odd, odd, ok);
        odd |= m_odd != 0;
        p += 32;
    }
    return line_end_from(s, p, end, odd, ok);
}
#define LINE_END(s, end, ok) (use_avx2 ? line_end_avx2(s, end, ok) : line_end(s, end, ok))
#else
#define LINE_END(s, end, ok) line_end(s, end, ok)
#endif

static int starts(const uint8_t *s, const uint8_t *e, const char *lit, int n)
{
    return e - s >= n && memcmp(s, lit, n) == 0;
}

/* The first `lit` in [s, e). glibc's memmem sets up a shift table on every call: a cost where the
 * literal sits near a line's start, as these do, on a million lines a GB. */
static const uint8_t *find_lit(const uint8_t *s, const uint8_t *e, const char *lit, int n)
{
    while (e - s >= n && (s = memchr(s, lit[0], (size_t)(e - s - n + 1))) != NULL) {
        if (memcmp(s + 1, lit + 1, n - 1) == 0) return s;
        s++;
    }
    return NULL;
}

/* engines.common.REQUEST_SHAPE: `\] (?:Received|Added|Finished|Aborted) request` anywhere in the
 * line. 2 when the line holds `] Received request` (anywhere), 1 for another
 * request line, 0 for none. */
static int is_request(const uint8_t *s, const uint8_t *e)
{
    int found = 0;
    for (const uint8_t *q = s; q < e && (q = memchr(q, ']', e - q)) != NULL; q++) {
        const uint8_t *w = q + 2;
        if (q + 1 >= e || q[1] != ' ')
            continue;
        if (starts(w, e, "Received request", 16))
            return 2;
        if (!found && (starts(w, e, "Added request", 13) || starts(w, e, "Finished request", 16) ||
                       starts(w, e, "Aborted request", 15)))
            found = 1;
    }
    return found;
}

static int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

static int host_char(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_' ||
           c == '.' || c == ':' || c == '[' || c == ']' || c == '-';
}

/* Whitespace as both regex engines agree on it; other control bytes are left to Python. */
static int ascii_space(uint8_t c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

#define UNSURE (-1)

/* One try of engines.common.ACCESS_SHAPE at an `INFO:` that starts at `p`:
 * `INFO: +[\w.:\[\]-]+:\d+ - "[A-Z]+ \S+ HTTP/[\d.]+" \d{3}`. Every part is a greedy run that
 * cannot give anything back (each is followed by a byte outside it), so one left-to-right walk
 * decides. Returns 1 (status, path set), 0, or UNSURE where a non-ASCII or control byte could
 * change what Python's Unicode classes (\w, \d, \S) say. */
static int access_at(const uint8_t *p, const uint8_t *e, int *status, const uint8_t **path,
                     int64_t *path_len)
{
    p += 5;
    if (p >= e || *p != ' ') return 0;
    while (p < e && *p == ' ') p++;
    const uint8_t *h = p;
    while (p < e && host_char(*p)) p++;
    if (p < e && *p >= 0x80) return UNSURE;
    /* the run must end `:digits` after at least one byte of host */
    const uint8_t *d = p;
    while (d > h && is_digit(d[-1])) d--;
    if (d == p || d - 1 <= h || d[-1] != ':') return 0;
    if (!starts(p, e, " - \"", 4)) return 0;
    p += 4;
    const uint8_t *m = p;
    while (p < e && *p >= 'A' && *p <= 'Z') p++;
    if (p == m || p >= e || *p != ' ') return 0;
    p++;
    const uint8_t *q = p;
    while (p < e && !ascii_space(*p)) {
        if (*p >= 0x80 || *p < 0x20) return UNSURE;
        p++;
    }
    if (p == q) return 0;
    *path = q;
    *path_len = p - q;
    if (!starts(p, e, " HTTP/", 6)) return 0;
    p += 6;
    const uint8_t *v = p;
    while (p < e && (is_digit(*p) || *p == '.')) p++;
    if (p < e && *p >= 0x80) return UNSURE;
    if (p == v || !starts(p, e, "\" ", 2)) return 0;
    p += 2;
    for (int i = 0; i < 3; i++) {
        if (p + i >= e) return 0;
        if (p[i] >= 0x80) return UNSURE;
        if (!is_digit(p[i])) return 0;
    }
    *status = (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
    return 1;
}

/* The leftmost `INFO:` where the pattern matches, as a regex search would find it. */
static int is_access(const uint8_t *s, const uint8_t *e, int *status, const uint8_t **path,
                     int64_t *path_len)
{
    const uint8_t *p = s;
    while (p < e && (p = find_lit(p, e, "INFO:", 5)) != NULL) {
        int r = access_at(p, e, status, path, path_len);
        if (r != 0) return r;
        p++;
    }
    return 0;
}

static int has_keyword(const uint8_t *s, int64_t n)
{
    for (int64_t i = 0; i + 1 < n; i++) {
        int k = pair_head[s[i] | (s[i + 1] << 8)];
        while (k >= 0) {
            if (i + kw_len[k] <= n && memcmp(s + i, kw[k], kw_len[k]) == 0) return 1;
            k = kw_next[k];
        }
    }
    return 0;
}

/* engines.common.note_prompt: after the first `prompt: ` and its quote, up to the closing
 * `', params` (or `', sampling_params`) when that starts within 256 bytes, else 256 bytes. */
static int prompt_head(const uint8_t *s, const uint8_t *e, int64_t *start, int64_t *end)
{
    static const char *closers[2] = {", params", ", sampling_params"};
    const uint8_t *p = find_lit(s, e, "prompt: ", 8);
    if (!p || e - p < 9 || (p[8] != '\'' && p[8] != '"')) return 0;
    int64_t b = p + 9 - s, n = e - s, stop = b + 256;
    for (int t = 0; t < 2; t++) {
        int len = (int)strlen(closers[t]);
        /* the first quote + closer at or after b, taken when it starts before `stop` */
        int64_t lim = stop < n - len ? stop : n - len;
        for (int64_t i = b; i < lim; i++) {
            const uint8_t *q = memchr(s + i, p[8], lim - i);
            if (!q) break;
            i = q - s;
            if (memcmp(q + 1, closers[t], len) == 0) { stop = i; break; }
        }
    }
    *start = b;
    *end = stop < n ? stop : n;
    return 1;
}

static int is_probe(const uint8_t *path, int64_t n)
{
    for (int i = 0; i < n_probe; i++)
        if (n >= probe_len[i] && memcmp(path, probe[i], probe_len[i]) == 0) return 1;
    return 0;
}

/* The small-input path, where every line is read: one byte per line of buf[0:n] (whole lines,
 * each ending with a newline), 1 where the line holds a keyword. Returns the lines flagged (at most
 * `cap`). The Python reader asks the same with one regex of ~250 alternatives, a line at a time. */
/* ---- a vLLM engine stats line in its plainest shape, read here rather than by a regex in Python ----
 * A long-running server writes one every few seconds: ~85,000 in a GB, and reading each with
 * engines.vllm.lines.stats_line took a third of a stats-heavy log's time. Only a strict subset of
 * what that reads is taken here (ASCII, no `ip=`, no ANSI or CR, no trailing blank, numbers as
 * digits with at most one point, V1's queue and its two usual items or none); any other line is
 * left to Python as before. tests/test_native_scanner.py holds both to the same values. */
#define STATS_WIDTH 19
enum { ST_MSG, ST_LEVEL, ST_LEVEL_LEN, ST_PROC, ST_PROC_LEN, ST_MON, ST_DAY, ST_HMS, ST_ENG,
       ST_PTPS, ST_GTPS, ST_RUN, ST_WAIT, ST_KV, ST_HIT, ST_H, ST_M, ST_S, ST_TEXT };

static int lit(const uint8_t **p, const uint8_t *e, const char *s, int n)
{
    if (e - *p < n || memcmp(*p, s, n) != 0) return 0;
    *p += n;
    return 1;
}
#define LIT(p, e, s) lit(p, e, s, (int)sizeof(s) - 1)

/* \d+ as Python's int() reads it, up to 15 digits (exact in a double) */
static int digits(const uint8_t **p, const uint8_t *e, double *out)
{
    const uint8_t *q = *p;
    int64_t v = 0;
    while (q < e && is_digit(*q) && q - *p < 16) v = v * 10 + (*q++ - '0');
    if (q == *p || q - *p > 15 || (q < e && is_digit(*q))) return 0;
    *p = q;
    *out = (double)v;
    return 1;
}

/* [\d.]+ as Python's float() reads it, taken only as digits with at most one point inside them:
 * strtod rounds correctly, as float() does. */
static int number(const uint8_t **p, const uint8_t *e, double *out)
{
    const uint8_t *q = *p;
    char tmp[64];
    while (q < e && is_digit(*q)) q++;
    if (q == *p) return 0;
    if (q < e && *q == '.') {
        const uint8_t *f = ++q;
        while (q < e && is_digit(*q)) q++;
        if (q == f) return 0;
    }
    if (q < e && (*q == '.' || is_digit(*q))) return 0;
    if (q - *p >= (int64_t)sizeof tmp) return 0;
    memcpy(tmp, *p, q - *p);
    tmp[q - *p] = 0;
    *out = strtod(tmp, NULL);
    *p = q;
    return 1;
}

static int ident_char(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_';
}

int dg_stats_line(const uint8_t *s, const uint8_t *e, double *v)
{
    const uint8_t *p = s;
    double x;
    if (e > s && (e[-1] == ' ' || e[-1] == '\r')) return 0;
    for (const uint8_t *q = s; q < e; q++)
        if (*q >= 0x7F || *q < 0x20) return 0;      /* ANSI, CR, tabs, non-ASCII: Python decides */
    v[ST_PROC] = -1; v[ST_PROC_LEN] = 0; v[ST_TEXT] = -1;
    if (p < e && *p == '(') {                       /* (Name pid=N) */
        const uint8_t *n = ++p;
        if (p >= e || !((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_')) return 0;
        while (p < e && (ident_char(*p) || *p == '.' || *p == '-')) p++;
        v[ST_PROC] = (double)(n - s); v[ST_PROC_LEN] = (double)(p - n);
        if (!LIT(&p, e, " pid=") || !digits(&p, e, &x) || !LIT(&p, e, ") ")) return 0;
    }
    /* LEVEL MM-DD HH:MM:SS[.d+] [file:line] */
    static const char *levels[] = {"DEBUG ", "INFO ", "WARNING ", "ERROR ", "CRITICAL "};
    int lv = -1;
    for (int i = 0; i < 5 && lv < 0; i++)
        if (starts(p, e, levels[i], (int)strlen(levels[i]))) lv = i;
    if (lv < 0) return 0;
    v[ST_LEVEL] = (double)(p - s); v[ST_LEVEL_LEN] = (double)(strlen(levels[lv]) - 1);
    p += strlen(levels[lv]);
    if (e - p < 15 || !is_digit(p[0]) || !is_digit(p[1]) || p[2] != '-' || !is_digit(p[3]) || !is_digit(p[4]) ||
        p[5] != ' ' || !is_digit(p[6]) || !is_digit(p[7]) || p[8] != ':' || !is_digit(p[9]) || !is_digit(p[10]) ||
        p[11] != ':' || !is_digit(p[12]) || !is_digit(p[13]))
        return 0;
    v[ST_MON] = (p[0] - '0') * 10 + (p[1] - '0');
    v[ST_DAY] = (p[3] - '0') * 10 + (p[4] - '0');
    v[ST_HMS] = (double)(p + 6 - s);
    v[ST_H] = (p[6] - '0') * 10 + (p[7] - '0');     /* the time as numbers: no text to split */
    v[ST_M] = (p[9] - '0') * 10 + (p[10] - '0');
    v[ST_S] = (p[12] - '0') * 10 + (p[13] - '0');
    p += 14;
    if (p < e && *p == '.') {
        const uint8_t *f = ++p;
        while (p < e && is_digit(*p)) p++;
        if (p == f) return 0;
    }
    if (!LIT(&p, e, " ")) return 0;
    if (p < e && *p == '[') p++;
    {   /* [\w./<>-]+ then :\d+] ; the `.../` alternative is within the class */
        const uint8_t *f = p;
        while (p < e && (ident_char(*p) || *p == '.' || *p == '/' || *p == '<' || *p == '>' || *p == '-')) p++;
        if (p == f || !LIT(&p, e, ":")) return 0;
        f = p;
        while (p < e && is_digit(*p)) p++;
        if (p == f || !LIT(&p, e, "] ")) return 0;
    }
    v[ST_MSG] = (double)(p - s);
    v[ST_ENG] = -1;
    if (LIT(&p, e, "Engine ")) {
        if (!digits(&p, e, &v[ST_ENG]) || !LIT(&p, e, ": ")) return 0;
    }
    if (!LIT(&p, e, "Avg prompt throughput: ") || !number(&p, e, &v[ST_PTPS]) ||
        !LIT(&p, e, " tokens/s, Avg generation throughput: ") || !number(&p, e, &v[ST_GTPS]) ||
        !LIT(&p, e, " tokens/s, Running: ") || !digits(&p, e, &v[ST_RUN]) || !LIT(&p, e, " req"))
        return 0;
    LIT(&p, e, "s");
    if (!LIT(&p, e, ", Waiting: ") || !digits(&p, e, &v[ST_WAIT]) || !LIT(&p, e, " req")) return 0;
    LIT(&p, e, "s");
    v[ST_KV] = v[ST_HIT] = -1;
    if (p == e) return 1;
    if (!LIT(&p, e, ", GPU KV cache usage: ") || !number(&p, e, &v[ST_KV]) ||
        !LIT(&p, e, "%, Prefix cache hit rate: ") || !number(&p, e, &v[ST_HIT]) || !LIT(&p, e, "%"))
        return 0;
    return p == e;
}

int64_t dg_keyword_flags(const uint8_t *buf, int64_t n, uint8_t *flags, int64_t cap)
{
    int64_t i = 0, pos = 0;
    while (pos < n && i < cap) {
        const uint8_t *s = buf + pos;
        const uint8_t *e = memchr(s, '\n', (size_t)(n - pos));
        if (!e) e = buf + n;
        flags[i++] = (uint8_t)has_keyword(s, e - s);
        pos = (e - buf) + 1;
    }
    return i;
}

/* Scan buf[pos:n] (whole lines: the block ends with a newline) until its end or until `rows`
 * or the heads are full; returns where it stopped. `keep`: evidence rows wanted per kind.
 * rows: ROW_WIDTH int64 each, offsets from buf's start, line indexes counted from the block's
 * first line (t->lines is the running count). Prompt heads come back as distinct keys with their
 * counts, in order of first appearance within this call; `slots` (HEAD_SLOTS int32) is scratch
 * for the table that finds them. */
#define HEAD_SLOTS 65536

/* A stats line C read (its values `v`): the line copied into `text` while it is at hand (a file
 * range's buffer is reused: read again later, each of a long-running server's ~85,000 a GB cost the
 * parsers' thread a pread), up to `cap` bytes in all; v[ST_TEXT] says where, or stays -1 when it
 * did not fit or no `text` was given (a block held in memory). Other rows' lines are few, or many
 * in a log of start-up lines only, whose copies would only make a segment bigger: read again. */
static inline void keep_text(double *v, const uint8_t *s, const uint8_t *e, uint8_t *text, int64_t cap,
                             int64_t *n_text)
{
    int64_t len = e - s;
    if (text && *n_text + len <= cap) {
        memcpy(text + *n_text, s, (size_t)len);
        v[ST_TEXT] = (double)*n_text;
        *n_text += len;
    }
}

int64_t dg_scan(const uint8_t *buf, int64_t n, int64_t pos, dg_totals *t, int64_t keep,
                int64_t *rows, int64_t rows_cap, int64_t *n_rows,
                uint64_t *keys, int64_t *counts, int64_t heads_cap, int64_t *n_heads, int32_t *slots,
                double *stats, int64_t *n_stats, uint8_t *text, int64_t text_cap, int64_t *n_text)
{
    const uint8_t *end = buf + n;
    if (heads_cap > HEAD_SLOTS / 2) heads_cap = HEAD_SLOTS / 2;     /* the table stays half empty */
    memset(slots, 0xFF, HEAD_SLOTS * sizeof(int32_t));
    while (pos < n) {
        if (*n_rows + 2 > rows_cap || *n_heads >= heads_cap) break;
        const uint8_t *s = buf + pos;
        int ok;
        const uint8_t *e = LINE_END(s, end, &ok);
        int64_t line = t->lines++;
        int64_t start = s - buf, stop = e - buf;
        pos = stop + 1;
        if (!ok) {
            t->bad++;
            continue;
        }
        int64_t *r = rows + *n_rows * ROW_WIDTH;
        int req = is_request(s, e);
        if (req) {
            t->req++;
            if (req == 2) {
                int64_t a, b;
                t->rcv++;
                if (prompt_head(s, e, &a, &b)) {
                    uint64_t k = HEAD_KEY(s + a, b - a);
                    uint32_t h = (uint32_t)(k ^ (k >> 29)) & (HEAD_SLOTS - 1);
                    while (slots[h] >= 0 && keys[slots[h]] != k) h = (h + 1) & (HEAD_SLOTS - 1);
                    if (slots[h] < 0) {
                        slots[h] = (int32_t)*n_heads;
                        keys[*n_heads] = k;
                        counts[*n_heads] = 0;
                        (*n_heads)++;
                    }
                    counts[slots[h]]++;
                }
                if (t->kept_rcv < keep) {
                    t->kept_rcv++;
                    r[0] = ROW_RECEIVED; r[1] = line; r[2] = start; r[3] = stop; r[4] = 0;
                    (*n_rows)++;
                }
            }
            continue;
        }
        int status = 0;
        const uint8_t *path = NULL;
        int64_t path_len = 0;
        int a = is_access(s, e, &status, &path, &path_len);
        if (a == 1) {
            t->acc++;
            t->status[status]++;
            if ((status >= 500 && status < 600) || status == 429) {
                if (t->kept[status] < keep) {
                    t->kept[status]++;
                    r[0] = ROW_HTTP; r[1] = line; r[2] = start; r[3] = stop; r[4] = status;
                    (*n_rows)++;
                    r += ROW_WIDTH;
                }
            }
            int probe_path = is_probe(path, path_len);
            if ((status == 503 || status == 429) && !probe_path)
                t->refused++;
            if (probe_path) {
                t->probe++;
                if (t->kept_probe < keep) {
                    t->kept_probe++;
                    r[0] = ROW_PROBE; r[1] = line; r[2] = start; r[3] = stop; r[4] = status;
                    (*n_rows)++;
                }
            }
            continue;
        }
        if (has_keyword(s, e - s)) {
            r[0] = ROW_KEYWORD; r[1] = line; r[2] = start; r[3] = stop; r[4] = 0;
            (*n_rows)++;
            /* a stats line read here: its values follow the segment's earlier ones, r[4] says which */
            if (stats && dg_stats_line(s, e, stats + *n_stats * STATS_WIDTH)) {
                keep_text(stats + *n_stats * STATS_WIDTH, s, e, text, text_cap, n_text);
                r[4] = 1 + t->stats++;
                (*n_stats)++;
            }
        }
    }
    return pos;
}

/* ---- reading a plain file itself: no Python (and no GIL) between the page cache and the scan ----
 * A big file is cut into byte ranges scanned on every core; a range holds the lines that start in
 * it, so each line is scanned once whatever the cut. */

/* The first line start at or after `off` (`end` when none): a range's first line. */
int64_t dg_line_start(int fd, int64_t off, uint8_t *buf, int64_t cap, int64_t end, int *err)
{
    if (off <= 0) return 0;
    for (int64_t p = off - 1; p < end; ) {
        ssize_t k = pread(fd, buf, end - p < cap ? end - p : cap, p);
        if (k < 0) {
            if (errno == EINTR) continue;
            *err = errno;
            return -1;
        }
        if (k == 0) break;
        const uint8_t *q = memchr(buf, '\n', k);
        if (q) return p + (q - buf) + 1;
        p += k;
    }
    return end;
}

/* Scan the lines of the file that start in [pos, to), reading through buf (cap bytes), as
 * dg_scan does a block. Row offsets are file offsets; line indexes count from the range's first
 * line (t->lines). Returns where to go on: >= to (or `end`) when the range is done, earlier when
 * rows or heads are full; -1 on a read error (errno in *err); -2 when the line at `pos` does not
 * fit in buf (call again with a bigger one). `end`: the file's size when the run began. */
int64_t dg_scan_fd(int fd, int64_t pos, int64_t to, int64_t end, uint8_t *buf, int64_t cap, int *err,
                   dg_totals *t, int64_t keep, int64_t *rows, int64_t rows_cap, int64_t *n_rows,
                   uint64_t *keys, int64_t *counts, int64_t heads_cap, int64_t *n_heads, int32_t *slots,
                   double *stats, int64_t *n_stats, uint8_t *text, int64_t text_cap, int64_t *n_text)
{
    int64_t from = pos;
    while (pos < to && pos < end) {
        ssize_t k = pread(fd, buf, end - pos < cap ? end - pos : cap, pos);
        if (k < 0) {
            if (errno == EINTR) continue;
            *err = errno;
            return -1;
        }
        if (k == 0) return end;     /* the file shrank since: what was cut off is gone */
        /* Whole lines: up to the end of the line that holds to - 1 when it is here, else up to
         * the last newline; the file's last line may have none. */
        int64_t lim = to - pos, n;
        const uint8_t *q = lim <= k ? memchr(buf + lim - 1, '\n', k - lim + 1) : NULL;
        if (q) n = q - buf + 1;
        else if (pos + k >= end) n = k;
        else if ((q = memrchr(buf, '\n', k)) != NULL) n = q - buf + 1;
        else return pos > from ? pos : -2;     /* what came before it first */
        int64_t first = *n_rows;
        int64_t r = dg_scan(buf, n, 0, t, keep, rows, rows_cap, n_rows, keys, counts, heads_cap, n_heads, slots,
                            stats, n_stats, text, text_cap, n_text);
        for (int64_t i = first; i < *n_rows; i++) {
            rows[i * ROW_WIDTH + 2] += pos;
            rows[i * ROW_WIDTH + 3] += pos;
        }
        if (r < n) return pos + r;  /* rows or heads full */
        pos += n;
    }
    return pos;
}

/* ---- the bounded table of prompt heads (engines.common.MAX_PREFIXES), kept across segments ----
 * Segments come back from the workers in line order and are added here one after another, so
 * the table keeps the heads the line-by-line path keeps: the first `cap` distinct ones. Key and
 * count share a slot, and slots are fetched ahead: a table this size lives outside the caches. */
typedef struct { uint64_t key; int64_t count; } dg_slot;     /* count 0: free */

typedef struct {
    int64_t cap, n, overflow, mask;
    dg_slot *slots;         /* a power of two >= 2 * cap */
    int64_t *order;         /* slot of each head, in order of first appearance */
} dg_heads;

static inline uint64_t slot_of(uint64_t k, int64_t mask)
{
    return (k * 0x9E3779B97F4A7C15ull >> 20) & (uint64_t)mask;
}

void dg_heads_add(dg_heads *t, const uint64_t *keys, const int64_t *counts, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (i + 8 < n) __builtin_prefetch(&t->slots[slot_of(keys[i + 8], t->mask)]);
        uint64_t k = keys[i], h = slot_of(k, t->mask);
        while (t->slots[h].count && t->slots[h].key != k) h = (h + 1) & (uint64_t)t->mask;
        if (t->slots[h].count) {
            t->slots[h].count += counts[i];
        } else if (t->n < t->cap) {
            t->slots[h].key = k;
            t->slots[h].count = counts[i];
            t->order[t->n++] = (int64_t)h;
        } else {
            t->overflow += counts[i];
        }
    }
}

/* The table's heads in order of first appearance, and their counts. */
void dg_heads_get(const dg_heads *t, uint64_t *keys, int64_t *counts)
{
    for (int64_t i = 0; i < t->n; i++) {
        keys[i] = t->slots[t->order[i]].key;
        counts[i] = t->slots[t->order[i]].count;
    }
}

/* ---- what the loader checks before it trusts the library (native/__init__.py) ----
 * The key of the scan.c this library was built from (build.py passes it), so a checkout whose
 * scan.c changed after the build is not scanned with old code; and the layout of the structures
 * Python mirrors with ctypes, so a mismatch is refused instead of corrupting memory. */
#ifndef DG_SOURCE_KEY
#define DG_SOURCE_KEY ""
#endif
const char *dg_source_key(void) { return DG_SOURCE_KEY; }

int64_t dg_layout(int64_t *out, int64_t n)
{
    int64_t v[] = {NSTATUS, ROW_WIDTH, STATS_WIDTH, (int64_t)sizeof(dg_totals), (int64_t)offsetof(dg_totals, status),
                   (int64_t)offsetof(dg_totals, kept_probe), (int64_t)offsetof(dg_totals, refused),
                   (int64_t)sizeof(dg_heads), (int64_t)offsetof(dg_heads, slots), (int64_t)offsetof(dg_heads, order),
                   (int64_t)sizeof(dg_slot)};
    int64_t m = (int64_t)(sizeof v / sizeof v[0]);
    for (int64_t i = 0; i < n && i < m; i++) out[i] = v[i];
    return m;
}
