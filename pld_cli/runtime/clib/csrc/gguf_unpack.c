/* A GGUF tensor's raw blocks written straight into a grouped matrix's arrays (grouped.c's layout:
   values blocked by 16 outputs and packed as bytes or nibbles, float32 scales and offsets per
   group in the same blocked order), so a load makes no copy of a tensor but its final one.

   Each type's u, scale and offset are loading/gguf_blocks.py's table, decoded block by block as
   ggml packs them: every scale and offset is a product of a float16 field and a small integer,
   exact in float32, and the float16 fields are widened by moving their bits, so every variant
   (and numpy's decoders, the tests' reference) gives the same bits. A matrix may hold its rows in
   another order (`order`: llama.cpp's interleaved q/k rows back in transformers' order) and in a
   layout wider than the type's own (groups of 16 where the type has 32, its scales repeated;
   bytes where it has nibbles; pld's loads keep each layout apart, runtime/native/quantized/
   parts.py), and the tensors of a fused q/k/v or gate/up matrix are each written in place at
   their own rows. A matrix of K-quants alone keeps their scales in the file's form
   (grouped.c): a factor per super-block, the float16 d or dmin widened, and a byte per group. Rows are spread over OpenMP's threads 16 at a time, taken as each
   thread is free (a block of the layout each where the part starts on a block's first row), so a
   thread the system holds back does not keep the others waiting, and a layer's tensors are
   written in one parallel region (gguf_unpack, at the end). */

#include <stdint.h>
#include <string.h>

#include "decoder.h"
#include "group_dots.h"

#define MAX_SCALES 16 /* scales in a block: a K-quant's sub-blocks of 16 */

/* float16 (two bytes, little-endian) as float32, exactly, by moving its bits: subnormals are
   normalized, infinities and NaNs keep their pattern. */
static float half_at(const uint8_t* p) {
  uint32_t h = p[0] | (uint32_t)p[1] << 8;
  uint32_t sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF, bits;
  if (exponent == 0x1F) {
    bits = sign | 0x7F800000u | mantissa << 13;
  } else if (exponent != 0) {
    bits = sign | (exponent + 112) << 23 | mantissa << 13;
  } else if (mantissa == 0) {
    bits = sign;
  } else { /* subnormal: mantissa * 2^-24, shifted until its leading bit is the implicit one */
    uint32_t shift = 0;
    for (; !(mantissa & 0x400); shift++) mantissa <<= 1;
    bits = sign | (113 - shift) << 23 | (mantissa & 0x3FF) << 13;
  }
  float value;
  memcpy(&value, &bits, sizeof value);
  return value;
}

/* n bytes of two nibbles as 2 n values: the low nibbles, then the high ones. */
static void nibbles_of(const uint8_t* q, int n, uint8_t* u) {
  for (int i = 0; i < n; i++) {
    u[i] = q[i] & 0x0F;
    u[i + n] = q[i] >> 4;
  }
}

/* Q5_0's and Q5_1's fifth bits: bit i of the 4 bytes at h (little-endian) is value i's. */
static void add_fifth_bits(const uint8_t* h, uint8_t* u) {
  for (int i = 0; i < 32; i++) u[i] |= ((h[i / 8] >> (i % 8)) & 1) << 4;
}

/* The K-quants' 256 values from 64 bytes of 2-bit values: per 32 bytes, bits 0-1, 2-3, 4-5,
   6-7 of each are values 0..31, 32..63, 64..95, 96..127 of that half. */
static void two_bit_planes(const uint8_t* q, uint8_t* u) {
  for (int half = 0; half < 2; half++)
    for (int plane = 0; plane < 4; plane++)
      for (int i = 0; i < 32; i++)
        u[half * 128 + plane * 32 + i] = (q[half * 32 + i] >> 2 * plane) & 3;
}

/* Q5_K's fifth bits, Q3_K's third: bit j of byte i is value 32 j + i's, as bit `at`. */
static void add_bit_planes(const uint8_t* h, int at, uint8_t* u) {
  for (int j = 0; j < 8; j++)
    for (int i = 0; i < 32; i++) u[j * 32 + i] |= ((h[i] >> j) & 1) << at;
}

/* A block's scales and offsets as the file forms them: group j's scale is d * sc[j] and its
   offset m * mc[j] (a float16 field, widened, times a small integer: exact in float32). A type
   with one group per block has d and m as that group's scale and offset themselves (`alone`: no
   product, which would quiet a signalling NaN's bits). */
typedef struct {
  float d, m;
  int8_t sc[MAX_SCALES], mc[MAX_SCALES];
  int alone;
} BlockScales;

/* A block of one group: scale d, offset m. */
static void one_group(float d, float m, BlockScales* s) {
  s->d = d;
  s->m = m;
  s->alone = 1;
}

/* Q4_K's and Q5_K's eight 6-bit scales and mins from their 12 bytes, as ggml packs them. */
static void k_scales(const uint8_t* p, float d, float dmin, BlockScales* s) {
  s->alone = 0;
  s->d = d;
  s->m = -dmin;
  for (int j = 0; j < 8; j++) {
    s->sc[j] = (int8_t)(j < 4 ? p[j] & 0x3F : (p[j + 4] & 0x0F) | ((p[j - 4] >> 2) & 0x30));
    s->mc[j] = (int8_t)(j < 4 ? p[j + 4] & 0x3F : (p[j + 4] >> 4) | ((p[j] >> 2) & 0x30));
  }
}

/* One block of each type: its values u, and its scales. */
typedef void (*Decode)(const uint8_t* b, uint8_t* u, BlockScales* s);

static void decode_q8_0(const uint8_t* b, uint8_t* u, BlockScales* s) {
  for (int i = 0; i < 32; i++) u[i] = b[2 + i] ^ 0x80; /* the int8 byte + 128 */
  one_group(half_at(b), -128.0f * half_at(b), s);
}

static void decode_q4_0(const uint8_t* b, uint8_t* u, BlockScales* s) {
  nibbles_of(b + 2, 16, u);
  one_group(half_at(b), -8.0f * half_at(b), s);
}

static void decode_q4_1(const uint8_t* b, uint8_t* u, BlockScales* s) {
  nibbles_of(b + 4, 16, u);
  one_group(half_at(b), half_at(b + 2), s);
}

static void decode_q5_0(const uint8_t* b, uint8_t* u, BlockScales* s) {
  nibbles_of(b + 6, 16, u);
  add_fifth_bits(b + 2, u);
  one_group(half_at(b), -16.0f * half_at(b), s);
}

static void decode_q5_1(const uint8_t* b, uint8_t* u, BlockScales* s) {
  nibbles_of(b + 8, 16, u);
  add_fifth_bits(b + 4, u);
  one_group(half_at(b), half_at(b + 2), s);
}

static void decode_q4_k(const uint8_t* b, uint8_t* u, BlockScales* s) {
  for (int chunk = 0; chunk < 4; chunk++) nibbles_of(b + 16 + 32 * chunk, 32, u + 64 * chunk);
  k_scales(b + 4, half_at(b), half_at(b + 2), s);
}

static void decode_q5_k(const uint8_t* b, uint8_t* u, BlockScales* s) {
  for (int chunk = 0; chunk < 4; chunk++) nibbles_of(b + 48 + 32 * chunk, 32, u + 64 * chunk);
  add_bit_planes(b + 16, 4, u);
  k_scales(b + 4, half_at(b), half_at(b + 2), s);
}

static void decode_q6_k(const uint8_t* b, uint8_t* u, BlockScales* s) {
  const uint8_t* high = b + 128;
  for (int half = 0; half < 2; half++) {
    nibbles_of(b + 64 * half, 64, u + 128 * half);
    for (int plane = 0; plane < 4; plane++)
      for (int i = 0; i < 32; i++)
        u[half * 128 + plane * 32 + i] |= ((high[half * 32 + i] >> 2 * plane) & 3) << 4;
  }
  s->alone = 0;
  s->d = half_at(b + 208);
  s->m = -32.0f * s->d;
  for (int j = 0; j < 16; j++) s->sc[j] = s->mc[j] = (int8_t)b[192 + j];
}

static void decode_q2_k(const uint8_t* b, uint8_t* u, BlockScales* s) {
  two_bit_planes(b + 16, u);
  s->alone = 0;
  s->d = half_at(b + 80);
  s->m = -half_at(b + 82);
  for (int j = 0; j < 16; j++) {
    s->sc[j] = (int8_t)(b[j] & 0x0F);
    s->mc[j] = (int8_t)(b[j] >> 4);
  }
}

static void decode_q3_k(const uint8_t* b, uint8_t* u, BlockScales* s) {
  two_bit_planes(b + 32, u);
  add_bit_planes(b, 2, u); /* set: the value is not lowered by 4 */
  const uint8_t *low = b + 96, *high = b + 104;
  s->alone = 0;
  s->d = half_at(b + 108);
  s->m = -4.0f * s->d;
  for (int j = 0; j < 16; j++) {
    int six = (j < 8 ? low[j] & 0x0F : low[j - 8] >> 4) | ((high[j % 4] >> 2 * (j / 4)) & 3) << 4;
    s->sc[j] = s->mc[j] = (int8_t)(six - 32);
  }
}

/* A type's blocks: values and bytes per block, inputs per scale, bits its values need. */
typedef struct {
  int values, bytes, group, bits;
  Decode decode;
} Format;

/* The format of a GGML type number (gguf-py's GGMLQuantizationType), or NULL. */
static const Format* format_of(int64_t type) {
  static const Format q8_0 = {32, 34, 32, 8, decode_q8_0}, q4_0 = {32, 18, 32, 4, decode_q4_0},
                      q4_1 = {32, 20, 32, 4, decode_q4_1}, q5_0 = {32, 22, 32, 8, decode_q5_0},
                      q5_1 = {32, 24, 32, 8, decode_q5_1}, q2_k = {256, 84, 16, 4, decode_q2_k},
                      q3_k = {256, 110, 16, 4, decode_q3_k}, q4_k = {256, 144, 32, 4, decode_q4_k},
                      q5_k = {256, 176, 32, 8, decode_q5_k}, q6_k = {256, 210, 16, 8, decode_q6_k};
  switch (type) {
    case 2: return &q4_0;
    case 3: return &q4_1;
    case 6: return &q5_0;
    case 7: return &q5_1;
    case 8: return &q8_0;
    case 10: return &q2_k;
    case 11: return &q3_k;
    case 12: return &q4_k;
    case 13: return &q5_k;
    case 14: return &q6_k;
    default: return NULL;
  }
}

/* One tensor to write, as JOB_FIELDS int64 values of gguf_unpack's table: its blocks (raw, row
   after row) and GGML type, its rows and inputs K, the row order (0: as stored; else output row
   first + r is the tensor's row order[r]), then the matrix it goes into: its values, scales and
   offsets, their bytes per group (0: none, the scales per group; the whole arrays), its rows N,
   the tensor's first row there, its group and bits, and the groups per factor. */
enum { JOB_RAW, JOB_TYPE, JOB_ROWS, JOB_COLS, JOB_ORDER, JOB_VALUES, JOB_SCALES, JOB_OFFSETS };
enum { JOB_SUB_SCALES = JOB_OFFSETS + 1, JOB_SUB_OFFSETS, JOB_OUT, JOB_FIRST, JOB_GROUP };
enum { JOB_BITS = JOB_GROUP + 1, JOB_SUPER, JOB_FIELDS };

/* Where one output row lies in the arrays: its block's values, scales and offsets (and their
   bytes per group where the matrix keeps the K-quants' form: `super` groups a factor), its lane
   in the block and the block's width (16, or what the last block holds). */
typedef struct {
  uint8_t* values;
  float *scales, *offsets;
  int8_t *sub_scales, *sub_offsets; /* NULL: a float32 scale and offset per group */
  int64_t super, lane, width;
} Place;

/* A row's place in a job's matrix (its arrays, from the job's fields). */
static Place place_of(const int64_t* job, int64_t n) {
  const int64_t N = job[JOB_OUT], K = job[JOB_COLS], groups = K / job[JOB_GROUP];
  const int64_t first = n / BLOCK * BLOCK, super = job[JOB_SUB_SCALES] ? job[JOB_SUPER] : 1;
  Place place = {(uint8_t*)(uintptr_t)job[JOB_VALUES] + first * K * job[JOB_BITS] / 8,
                 (float*)(uintptr_t)job[JOB_SCALES] + first * (groups / super),
                 (float*)(uintptr_t)job[JOB_OFFSETS] + first * (groups / super),
                 NULL,
                 NULL,
                 super,
                 n - first,
                 N - first < BLOCK ? N - first : BLOCK};
  if (job[JOB_SUB_SCALES]) {
    place.sub_scales = (int8_t*)(uintptr_t)job[JOB_SUB_SCALES] + first * groups;
    place.sub_offsets = (int8_t*)(uintptr_t)job[JOB_SUB_OFFSETS] + first * groups;
  }
  return place;
}

/* A block's `count` values, inputs e0.. of the row: four inputs to each 4-byte cell (8 bits), or
   eight as low and high nibbles of one (4 bits). */
static void put_values(const uint8_t* u, int count, int64_t e0, Place p, int64_t bits) {
  if (bits == 8) {
    for (int e = 0; e < count; e += 4)
      memcpy(p.values + ((e0 + e) / 4 * p.width + p.lane) * 4, u + e, 4);
    return;
  }
  for (int e = 0; e < count; e += 8) {
    uint8_t* cell = p.values + ((e0 + e) / 8 * p.width + p.lane) * 4;
    for (int i = 0; i < 4; i++) cell[i] = u[e + i] | u[e + 4 + i] << 4;
  }
}

/* A block's scales and offsets, one per `own` inputs, as one per `group` (each repeated): as the
   products d * sc and m * mc, or in the K-quants' form (the block is one super-block of the
   matrix: its factors d and m, then the integers). */
static void put_scales(const BlockScales* s, int count, int own, int64_t group, int64_t e0,
                       Place p) {
  int repeat = own / (int)group;
  if (p.sub_scales) {
    int64_t at = e0 / group / p.super * p.width + p.lane;
    p.scales[at] = s->d;
    p.offsets[at] = s->m;
  }
  for (int j = 0; j < count / (int)group; j++) {
    int64_t at = (e0 / group + j) * p.width + p.lane;
    if (p.sub_scales) {
      p.sub_scales[at] = s->sc[j / repeat];
      p.sub_offsets[at] = s->mc[j / repeat];
    } else if (s->alone) {
      p.scales[at] = s->d;
      p.offsets[at] = s->m;
    } else {
      p.scales[at] = s->d * (float)s->sc[j / repeat];
      p.offsets[at] = s->m * (float)s->mc[j / repeat];
    }
  }
}

/* Whether a job's type has a decoder here and its matrix's layout and rows can hold it: the
   K-quants' form takes a type whose block is one of its super-blocks. */
static int job_fits(const int64_t* job) {
  const Format* f = format_of(job[JOB_TYPE]);
  int64_t K = job[JOB_COLS], group = job[JOB_GROUP], bits = job[JOB_BITS];
  int64_t first = job[JOB_FIRST], rows = job[JOB_ROWS];
  return f && K > 0 && K % f->values == 0 && (group == 16 || group == 32) && group <= f->group &&
         (bits == 8 || bits == 4) && bits >= f->bits && first >= 0 && rows >= 0 &&
         first + rows <= job[JOB_OUT] &&
         (!job[JOB_SUB_SCALES] || (job[JOB_SUB_OFFSETS] && group * job[JOB_SUPER] == f->values));
}

/* Rows r0..r1-1 of a job's tensor into its matrix, block by block of the type. */
static void write_rows(const int64_t* job, int64_t r0, int64_t r1) {
  const Format* f = format_of(job[JOB_TYPE]);
  const int64_t K = job[JOB_COLS], blocks = K / f->values, row_bytes = blocks * f->bytes;
  const uint8_t* raw = (const uint8_t*)(uintptr_t)job[JOB_RAW];
  const int64_t* order = (const int64_t*)(uintptr_t)job[JOB_ORDER];
  for (int64_t r = r0; r < r1; r++) {
    const uint8_t* source = raw + (order ? order[r] : r) * row_bytes;
    Place place = place_of(job, job[JOB_FIRST] + r);
    uint8_t u[SUPER_VALUES]; /* a K-quant block: the largest of any type */
    BlockScales s;
    for (int64_t k = 0; k < blocks; k++) {
      f->decode(source + k * f->bytes, u, &s);
      put_values(u, f->values, k * f->values, place, job[JOB_BITS]);
      put_scales(&s, f->values, f->group, job[JOB_GROUP], k * f->values, place);
    }
  }
}

static int64_t chunks_of(const int64_t* job) { return (job[JOB_ROWS] + BLOCK - 1) / BLOCK; }

/* Writes `n` tensors (`jobs`: n rows of JOB_FIELDS, above) into their matrices, all in one
   parallel region: each region ends waiting for every thread, which a busy machine (its cores
   shared) makes a wait of a time slice, so a layer's matrices go in one call, not one each.
   Returns 0, or -2, writing nothing, where some job does not fit (job_fits). */
int gguf_unpack(const int64_t* jobs, int64_t n) {
  int64_t chunks = 0;
  for (int64_t j = 0; j < n; j++) {
    if (!job_fits(jobs + j * JOB_FIELDS)) return -2;
    chunks += chunks_of(jobs + j * JOB_FIELDS);
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t c = 0; c < chunks; c++) { /* chunk c: BLOCK rows of the job it falls in */
    const int64_t* job = jobs;
    int64_t at = c;
    for (; at >= chunks_of(job); job += JOB_FIELDS) at -= chunks_of(job);
    int64_t r1 = (at + 1) * BLOCK < job[JOB_ROWS] ? (at + 1) * BLOCK : job[JOB_ROWS];
    write_rows(job, at * BLOCK, r1);
  }
  return 0;
}
