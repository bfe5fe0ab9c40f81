"""THE table of dyngrad's public API: every name a user reaches, once, for both engines.

It drives both engines' exported names (`dyngrad.NAME`, `dyngrad.reference.NAME`, `nn.functional.NAME`), the
methods and properties attached to each engine's Tensor, the C++ fast-path registration (Note [Fast paths] in
csrc/bindings/fast_paths.cpp), the list of supported names in docs/api.md (scripts/gen_api_docs.py) and the parity
tests (tests/test_api_table.py).

Columns:
  name      the public name
  impl      where it is implemented: `module.attr` in python/dyngrad/_api/ (a dict attr is looked up by name),
            `core` (the engine's _C provides it: _C.NAME, or Tensor.NAME for methods and properties),
            `autograd.X` / `package.X` for names living in those shared packages
  kinds     fn (dyngrad.NAME), method (Tensor.NAME), prop (Tensor property), op (a Tensor dunder),
            F (nn.functional.NAME), special (dyngrad.special.NAME), linalg (dyngrad.linalg.NAME); out: dyngrad.NAME,
            special.NAME and linalg.NAME take torch's out= (_api/out.py); several separated by commas
  inplace   the in-place method generated from impl (`x.NAME_(...)`: run impl, write the result into x), or -
  hot       hot: on the C++ engine a hand-written fast path stands in front of impl for the common call
            (Note [Fast paths]); - otherwise
  uses      the core ops it is built from (documentation; `prim` = the primitive of ops.def of the same name)
"""

TABLE = """
# name            impl                                kinds           inplace      hot uses
# ----- types, dtypes, grad mode -------------------------------------------------------------------------------
Tensor            core                                fn              -            -   Tensor
Size              args.Size                           fn              -            -   -
dtype             core                                fn              -            -   dtype
float32           core                                fn              -            -   -
float64           core                                fn              -            -   -
int64             core                                fn              -            -   -
bool              core                                fn              -            -   -
float             core:float32                        fn              -            -   -
double            core:float64                        fn              -            -   -
long              core:int64                          fn              -            -   -
get_default_dtype args.get_default_dtype              fn              -            -   -
int32             core                                fn              -            -   -
int16             core                                fn              -            -   -
int8              core                                fn              -            -   -
uint8             core                                fn              -            -   -
float16           core                                fn              -            -   -
bfloat16          core                                fn              -            -   -
int               core:int32                          fn              -            -   -
short             core:int16                          fn              -            -   -
half              core:float16                        fn              -            -   -
set_default_dtype dtype_info.set_default_dtype        fn              -            -   -
finfo             dtype_info.finfo                    fn              -            -   -
iinfo             dtype_info.iinfo                    fn              -            -   -
promote_types     dtype_info.promote_types            fn              -            -   -
result_type       dtype_info.result_type              fn              -            -   -
can_cast          dtype_info.can_cast                 fn              -            -   -
device            device.device                       fn              -            -   -
set_default_device device.set_default_device          fn              -            -   -
get_default_device device.get_default_device          fn              -            -   -
no_grad           autograd.grad_mode.no_grad          fn              -            -   _set_grad_enabled
enable_grad       autograd.grad_mode.enable_grad      fn              -            -   _set_grad_enabled
set_grad_enabled  autograd.grad_mode.set_grad_enabled fn              -            -   _set_grad_enabled
inference_mode    autograd.grad_mode.inference_mode   fn              -            -   _set_grad_enabled
is_grad_enabled   autograd.grad_mode.is_grad_enabled  fn              -            -   is_grad_enabled
get_num_threads   settings.get_num_threads            fn              -            -   get_num_threads
set_num_threads   settings.set_num_threads            fn              -            -   set_num_threads
get_num_interop_threads settings.get_num_interop_threads fn           -            -   -
set_num_interop_threads settings.set_num_interop_threads fn           -            -   -
use_deterministic_algorithms settings.use_deterministic_algorithms fn  -            -   -
are_deterministic_algorithms_enabled settings.are_deterministic_algorithms_enabled fn - - -
is_deterministic_algorithms_warn_only_enabled settings.is_deterministic_algorithms_warn_only_enabled fn - - -
set_deterministic_debug_mode settings.set_deterministic_debug_mode fn  -            -   -
get_deterministic_debug_mode settings.get_deterministic_debug_mode fn  -            -   -
set_float32_matmul_precision settings.set_float32_matmul_precision fn  -            -   -
get_float32_matmul_precision settings.get_float32_matmul_precision fn  -            -   -
set_warn_always   settings.set_warn_always            fn              -            -   -
is_warn_always_enabled settings.is_warn_always_enabled fn             -            -   -
typename          settings.typename                   fn              -            -   -
set_default_tensor_type settings.set_default_tensor_type fn           -            -   -
set_printoptions  printing.set_printoptions           fn              -            -   -
is_inference_mode_enabled autograd.grad_mode.is_inference_mode_enabled fn - - -
is_anomaly_enabled autograd.anomaly.is_anomaly_enabled fn             -            -   -
set_anomaly_enabled autograd.anomaly.set_anomaly_enabled fn           -            -   -
is_anomaly_check_nan_enabled autograd.anomaly.is_anomaly_check_nan_enabled fn - - -
# ----- creation ---------------------------------------------------------------------------------------------
tensor            creation.tensor                     fn              -            -   copy_from_numpy
as_tensor         creation.as_tensor                  fn              -            -   from_numpy
from_numpy        creation.from_numpy                 fn              -            -   from_numpy
zeros             creation.zeros                      fn,out          -            -   full
ones              creation.ones                       fn,out          -            -   full
empty             creation.empty                      fn,out          -            -   empty
full              creation.full                       fn,out          -            -   full
zeros_like        creation.zeros_like                 fn              -            -   full
ones_like         creation.ones_like                  fn              -            -   full
empty_like        creation.empty_like                 fn              -            -   empty
full_like         creation.full_like                  fn              -            -   full
rand_like         creation.rand_like                  fn              -            -   rand
randn_like        creation.randn_like                 fn              -            -   randn
arange            creation.arange                     fn,out          -            -   copy_from_numpy
linspace          creation.linspace                   fn,out          -            -   copy_from_numpy
eye               creation.eye                        fn,out          -            -   copy_from_numpy
rand              creation.rand                       fn,out          -            -   rand
randn             creation.randn                      fn,out          -            -   randn
randint           creation.randint                    fn,out          -            -   randint
randperm          creation.randperm                   fn,out          -            -   randperm
normal            creation.normal                     fn,out          -            -   randn,mul,add
bernoulli         creation.bernoulli                  fn,out,method   -            -   rand,compare
manual_seed       generator.manual_seed               fn              -            -   manual_seed
initial_seed      generator.initial_seed              fn              -            -   initial_seed
seed              generator.seed                      fn              -            -   manual_seed
# ----- generators and random sampling (_api/generator.py: Note [Generators as swapped core states]) ----------
Generator         generator.Generator                 fn              -            -   _get_rng_state,_set_rng_state
default_generator generator.default_generator         fn              -            -   _get_rng_state,_set_rng_state
get_rng_state     generator.get_rng_state             fn              -            -   _get_rng_state
set_rng_state     generator.set_rng_state             fn              -            -   _set_rng_state
randint_like      creation.randint_like               fn              -            -   randint
multinomial       random_ops.multinomial              fn,out,method   -            -   rand
poisson           random_ops.poisson                  fn              -            -   randint
binomial          random_ops.binomial                 fn              -            -   randint
random_           random_ops.random_                  method          -            -   randint
exponential_      random_ops.exponential_             method          -            -   rand
geometric_        random_ops.geometric_               method          -            -   rand
cauchy_           random_ops.cauchy_                  method          -            -   rand
log_normal_       random_ops.log_normal_              method          -            -   randn
is_tensor         creation.is_tensor                  fn              -            -   -
numel             creation.numel                      fn              -            -   -
is_floating_point creation.is_floating_point          fn              -            -   -
new_zeros         creation.new_zeros                  method          -            -   full
new_ones          creation.new_ones                   method          -            -   full
new_empty         creation.new_empty                  method          -            -   empty
new_full          creation.new_full                   method          -            -   full
new_tensor        creation.new_tensor                 method          -            -   copy_from_numpy
# ----- arithmetic (numpy = a custom Function with a numpy forward, Note [numpy forwards] in pointwise.py) --------
add               pointwise.add                       fn,method,out   add_         hot prim,mul
sub               pointwise.sub                       fn,method,out   sub_         hot prim,mul
subtract          pointwise.sub                       fn,method,out   subtract_    -   sub,mul
rsub              pointwise.rsub                      fn              -            -   sub,mul
mul               pointwise.mul                       fn,method,out   mul_         hot prim
multiply          pointwise.mul                       fn,method,out   multiply_    -   mul
div               pointwise.div                       fn,method,out   div_         hot prim,numpy
divide            pointwise.div                       fn,method,out   divide_      -   div,numpy
true_divide       pointwise.true_divide               fn,method,out   true_divide_ -   div
floor_divide      pointwise.floor_divide              fn,method,out   floor_divide_ -  numpy
remainder         pointwise.remainder                 fn,method,out   remainder_   -   numpy
fmod              pointwise.fmod                      fn,method,out   fmod_        -   numpy
addcmul           pointwise.addcmul                   fn,method,out   addcmul_     -   mul,add
addcdiv           pointwise.addcdiv                   fn,method,out   addcdiv_     -   mul,div,add
lerp              pointwise.lerp                      fn,method,out   lerp_        -   sub,mul,add,where
pow               pointwise.pow                       fn,method,out   pow_         -   prim,pow_scalar
float_power       pointwise.float_power               fn,method,out   -            -   to_dtype,pow,pow_scalar
float_power_      pointwise.float_power_              method          -            -   to_dtype,pow,pow_scalar
neg               pointwise.neg                       fn,method,out   neg_         hot prim
negative          pointwise.neg                       fn,method,out   negative_    -   neg
positive          pointwise.positive                  fn,method       -            -   -
reciprocal        pointwise.reciprocal                fn,method,out   reciprocal_  -   div
square            pointwise.square                    fn,method,out   square_      -   mul
maximum           pointwise.maximum                   fn,method,out   -            -   prim
minimum           pointwise.minimum                   fn,method,out   -            -   prim
fmax              pointwise.fmax                      fn,method,out   -            -   compare,isnan,where
fmin              pointwise.fmin                      fn,method,out   -            -   compare,isnan,where
where             pointwise.where                     fn,out          -            -   prim
where             pointwise.where_method              method          -            -   prim
clamp             pointwise.clamp                     fn,method,out   clamp_       -   prim,maximum,minimum,where
clip              pointwise.clamp                     fn,method,out   clip_        -   clamp
clamp_min         pointwise.clamp_min                 fn,method,out   clamp_min_   -   clamp
clamp_max         pointwise.clamp_max                 fn,method,out   clamp_max_   -   clamp
nan_to_num        pointwise.nan_to_num                fn,method,out   nan_to_num_  -   where,isnan,compare
copysign          pointwise.copysign                  fn,method,out   copysign_    -   numpy
hypot             pointwise.hypot                     fn,method,out   hypot_       -   numpy
atan2             pointwise.atan2                     fn,method,out   atan2_       -   numpy
arctan2           pointwise.atan2                     fn,method,out   arctan2_     -   numpy
logaddexp         pointwise.logaddexp                 fn,method,out   -            -   numpy
logaddexp2        pointwise.logaddexp2                fn,method,out   -            -   numpy
xlogy             pointwise.xlogy                     fn,method,out,special xlogy_ -   numpy
heaviside         pointwise.heaviside                 fn,method,out   heaviside_   -   numpy
# ----- unary ------------------------------------------------------------------------------------------------
exp               pointwise.exp                       fn,method,out   exp_         hot prim
exp2              pointwise.exp2                      fn,method,out,special exp2_  -   numpy
expm1             pointwise.expm1                     fn,method,out,special expm1_ -   numpy
log               pointwise.log                       fn,method,out   log_         hot prim
log2              pointwise.log2                      fn,method,out   log2_        -   numpy
log10             pointwise.log10                     fn,method,out   log10_       -   numpy
log1p             pointwise.log1p                     fn,method,out,special log1p_ -   numpy
sqrt              pointwise.sqrt                      fn,method,out   sqrt_        hot prim
rsqrt             pointwise.rsqrt                     fn,method,out   rsqrt_       hot prim
abs               pointwise.abs                       fn,method,out   abs_         hot prim
absolute          pointwise.abs                       fn,method,out   absolute_    -   abs
sin               pointwise.sin                       fn,method,out   sin_         hot prim
cos               pointwise.cos                       fn,method,out   cos_         hot prim
tan               pointwise.tan                       fn,method,out   tan_         -   numpy
asin              pointwise.asin                      fn,method,out   asin_        -   numpy
arcsin            pointwise.asin                      fn,method,out   arcsin_      -   numpy
acos              pointwise.acos                      fn,method,out   acos_        -   numpy
arccos            pointwise.acos                      fn,method,out   arccos_      -   numpy
atan              pointwise.atan                      fn,method,out   atan_        -   numpy
arctan            pointwise.atan                      fn,method,out   arctan_      -   numpy
sinh              pointwise.sinh                      fn,method,out   sinh_        -   numpy
cosh              pointwise.cosh                      fn,method,out   cosh_        -   numpy
tanh              pointwise.tanh                      fn,method,F,out tanh_        hot prim
asinh             pointwise.asinh                     fn,method,out   asinh_       -   numpy
arcsinh           pointwise.asinh                     fn,method,out   arcsinh_     -   numpy
acosh             pointwise.acosh                     fn,method,out   acosh_       -   numpy
arccosh           pointwise.acosh                     fn,method,out   arccosh_     -   numpy
atanh             pointwise.atanh                     fn,method,out   atanh_       -   numpy
arctanh           pointwise.atanh                     fn,method,out   arctanh_     -   numpy
deg2rad           pointwise.deg2rad                   fn,method,out   deg2rad_     -   mul
rad2deg           pointwise.rad2deg                   fn,method,out   rad2deg_     -   mul
sigmoid           pointwise.sigmoid                   fn,method,F,out sigmoid_     hot prim
expit             pointwise.sigmoid                   special,out     -            -   sigmoid
logit             pointwise.logit                     fn,method,out,special logit_ -   numpy
relu              pointwise.relu                      fn,method       relu_        hot prim
sign              pointwise.sign                      fn,method,out   sign_        -   prim,isnan,where
sgn               pointwise.sign                      fn,method,out   sgn_         -   sign
signbit           pointwise.signbit                   fn,method,out   -            -   -
floor             pointwise.floor                     fn,method,out   floor_       -   numpy
ceil              pointwise.ceil                      fn,method,out   ceil_        -   numpy
round             pointwise.round                     fn,method,out,special round_ -   numpy
trunc             pointwise.trunc                     fn,method,out   trunc_       -   numpy
fix               pointwise.trunc                     fn,method,out   fix_         -   numpy
frac              pointwise.frac                      fn,method,out   frac_        -   sub,numpy
erf               pointwise.erf                       fn,method,out,special erf_   hot prim
erfc              pointwise.erfc                      fn,method,out,special erfc_  -   numpy
erfinv            pointwise.erfinv                    fn,method,out,special erfinv_ -  numpy
lgamma            pointwise.lgamma                    fn,method,out   lgamma_      -   numpy
gammaln           pointwise.lgamma                    special,out     -            -   numpy
digamma           pointwise.digamma                   fn,method,out,special digamma_ - numpy
psi               pointwise.digamma                   special,out     -            -   numpy
polygamma         pointwise.polygamma                 fn,out,special  -            -   numpy
polygamma         pointwise.polygamma_method          method          polygamma_   -   numpy
mvlgamma          pointwise.mvlgamma                  fn,method,out   mvlgamma_    -   numpy,add,sum
multigammaln      pointwise.mvlgamma                  special,out     -            -   numpy,add,sum
sinc              pointwise.sinc                      fn,method,out,special sinc_  -   numpy
i0                pointwise.i0                        fn,method,out,special i0_    -   numpy
# ----- comparisons and tests --------------------------------------------------------------------------------
eq                pointwise.eq                        fn,method,out   eq_          -   compare
ne                pointwise.ne                        fn,method,out   ne_          -   compare
lt                pointwise.lt                        fn,method,out   lt_          -   compare
le                pointwise.le                        fn,method,out   le_          -   compare
gt                pointwise.gt                        fn,method,out   gt_          -   compare
ge                pointwise.ge                        fn,method,out   ge_          -   compare
isnan             pointwise.isnan                     fn,method,out   -            -   isnan
isfinite          pointwise.isfinite                  fn,method,out   -            -   isfinite
isinf             pointwise.isinf                     fn,method       -            -   compare,logical_or
isposinf          pointwise.isposinf                  fn,method,out   -            -   compare
isneginf          pointwise.isneginf                  fn,method,out   -            -   compare
isreal            pointwise.isreal                    fn,method       -            -   full
isclose           pointwise.isclose                   fn,method       -            -   -
allclose          pointwise.allclose                  fn,method       -            -   -
equal             pointwise.equal                     fn,method       -            -   -
# ----- logic and bits ---------------------------------------------------------------------------------------
logical_and       pointwise.logical_and               fn,method,out   logical_and_ -   logical_and
logical_or        pointwise.logical_or                fn,method,out   logical_or_  -   logical_or
logical_xor       pointwise.logical_xor               fn,method,out   logical_xor_ -   logical_xor
logical_not       pointwise.logical_not               fn,method,out   logical_not_ -   logical_not
bitwise_and       pointwise.bitwise_and               fn,method,out   bitwise_and_ -   -
bitwise_or        pointwise.bitwise_or                fn,method,out   bitwise_or_  -   -
bitwise_xor       pointwise.bitwise_xor               fn,method,out   bitwise_xor_ -   -
bitwise_not       pointwise.bitwise_not               fn,method,out   bitwise_not_ -   -
bitwise_left_shift pointwise.bitwise_left_shift       fn,method,out   bitwise_left_shift_ - -
bitwise_right_shift pointwise.bitwise_right_shift     fn,method,out   bitwise_right_shift_ - -
# ----- torch.special: the names it alone has (the shared ones carry `special` in their rows above) ----------
erfcx             special.erfcx                       special,out     -            -   numpy
log_ndtr          special.log_ndtr                    special,out     -            -   numpy
ndtr              special.ndtr                        special,out     -            -   numpy,mul
ndtri             special.ndtri                       special,out     -            -   numpy
xlog1py           special.xlog1py                     special,out     -            -   numpy
entr              special.entr                        special,out     -            -   numpy
i0e               special.i0e                         special,out     -            -   numpy
i1                special.i1                          special,out     -            -   numpy
i1e               special.i1e                         special,out     -            -   numpy
zeta              special.zeta                        special,out     -            -   numpy
softmax           special.softmax                     special         -            -   softmax
log_softmax       special.log_softmax                 special         -            -   log_softmax
logsumexp         special.logsumexp                   special,out     -            -   logsumexp
# ----- reductions -------------------------------------------------------------------------------------------
sum               reduction.sum                       fn,method,out   -            hot prim
nansum            reduction.nansum                    fn,method,out   -            -   isnan,where,sum
mean              reduction.mean                      fn,method,out   -            hot prim
nanmean           reduction.nanmean                   fn,method,out   -            -   isnan,where,sum,div
var               reduction.var                       fn,method,out   -            -   var
std               reduction.std                       fn,method,out   -            -   std
var_mean          reduction.var_mean                  fn              -            -   var,mean
std_mean          reduction.std_mean                  fn              -            -   std,mean
prod              reduction.prod                      fn,method,out   -            -   slice,mul,cat
max               reduction.max                       fn,method,out   -            -   amax,argmax,gather,maximum
min               reduction.min                       fn,method,out   -            -   amin,argmin,gather,minimum
amax              reduction.amax                      fn,method,out   -            -   prim
amin              reduction.amin                      fn,method,out   -            -   prim
aminmax           reduction.aminmax                   fn,method,out   -            -   amin,amax
argmax            reduction.argmax                    fn,method,out   -            -   argmax
argmin            reduction.argmin                    fn,method,out   -            -   argmin
logsumexp         reduction.logsumexp                 fn,method,out   -            -   prim
any               reduction.any                       fn,method,out   -            -   compare,sum
all               reduction.all                       fn,method,out   -            -   compare,sum
count_nonzero     reduction.count_nonzero             fn,method       -            -   compare,sum
norm              reduction.norm                      fn              -            -   abs,sum,sqrt,pow_scalar,amax,amin,where
norm              reduction.norm_method               method          -            -   abs,sum,sqrt,pow_scalar,amax,amin,where
# ----- scans ------------------------------------------------------------------------------------------------
cumsum            scan.cumsum                         fn,method,out   cumsum_      -   index_select
cumprod           scan.cumprod                        fn,method,out   cumprod_     -   index_select,where,div,mul
cummax            scan.cummax                         fn,method,out   -            -   gather
cummin            scan.cummin                         fn,method,out   -            -   gather
logcumsumexp      scan.logcumsumexp                   fn,method,out   -            -   index_select,where,log,exp
# ----- sorting and order statistics -------------------------------------------------------------------------
sort              sorting.sort                        fn,method,out   -            -   gather
argsort           sorting.argsort                     fn,method,out   -            -   -
msort             sorting.msort                       fn,method,out   -            -   gather
topk              sorting.topk                        fn,method,out   -            -   gather
kthvalue          sorting.kthvalue                    fn,method,out   -            -   gather
median            sorting.median                      fn,method,out   -            -   gather,mul
nanmedian         sorting.nanmedian                   fn,method,out   -            -   gather,mul
mode              sorting.mode                        fn,method,out   -            -   gather
quantile          sorting.quantile                    fn,method,out   -            -   gather,sub,mul,where
nanquantile       sorting.nanquantile                 fn,method,out   -            -   gather,sub,mul,where
unique            sorting.unique                      fn,method       -            -   -
unique_consecutive sorting.unique_consecutive         fn,method       -            -   -
histc             sorting.histc                       fn,method,out   -            -   -
bincount          sorting.bincount                    fn,method       -            -   -
# ----- linear algebra: products ------------------------------------------------------------------------------
matmul            linalg.matmul                       fn,method,out   -            hot prim
mm                linalg.mm                           fn,method,out   -            -   matmul
bmm               linalg.bmm                          fn,method,out   -            -   matmul
mv                linalg.mv                           fn,method,out   -            -   matmul
dot               linalg.dot                          fn,method,out   -            -   matmul
vdot              linalg.vdot                         fn,method,out   -            -   matmul
inner             linalg.inner                        fn,method,out   -            -   permute,reshape,matmul,sum
outer             linalg.outer                        fn,method,out   -            -   unsqueeze,mul
ger               linalg.outer                        fn,method,out   -            -   unsqueeze,mul
addmm             linalg.addmm                        fn,method,out   addmm_       -   matmul,mul,add
addmv             linalg.addmv                        fn,method,out   addmv_       -   matmul,mul,add
addbmm            linalg.addbmm                       fn,method,out   addbmm_      -   permute,reshape,matmul,mul,add
baddbmm           linalg.baddbmm                      fn,method,out   baddbmm_     -   matmul,mul,add
addr              linalg.addr                         fn,method,out   addr_        -   unsqueeze,mul,add
einsum            linalg.einsum                       fn              -            -   permute,reshape,expand,matmul,mul,sum,slice
tensordot         linalg.tensordot                    fn,out          -            -   permute,reshape,matmul,sum
kron              linalg.kron                         fn,method,out   -            -   reshape,mul
cross             linalg.cross                        fn,method,out   -            -   expand,index_select,mul,sub
trace             linalg.trace                        fn,method       -            -   reshape,slice,sum
chain_matmul      linalg.chain_matmul                 fn,out          -            -   matmul
# ----- linear algebra: factorisations (numpy.linalg forwards, custom Functions) ------------------------------
inverse           linalg.inverse                      fn,method,out   -            -   matmul
det               linalg.det                          fn,method       -            -   matmul,mul
logdet            linalg.logdet                       fn,method       -            -   matmul,where
slogdet           linalg.slogdet                      fn,method       -            -   matmul,mul
pinverse          linalg.pinverse                     fn,method       -            -   matmul
cholesky          linalg.cholesky                     fn,method,out   -            -   matmul,mul
qr                linalg.qr                           fn,method,out   -            -   matmul,mul,cat
svd               linalg.svd                          fn,method,out   -            -   matmul,mul,div
matrix_power      linalg.matrix_power                 fn,method,out   -            -   matmul
# ----- torch.linalg (kind linalg: dyngrad.linalg.NAME) ------------------------------------------------------
LinAlgError       linalg.LinAlgError                  linalg          -            -   -
matmul            linalg.matmul                       linalg,out      -            -   matmul
diagonal          linalg.linalg_diagonal              linalg          -            -   permute,reshape,slice
multi_dot         linalg.multi_dot                    linalg,out      -            -   matmul
cross             linalg.linalg_cross                 linalg,out      -            -   expand,index_select,mul,sub
vecdot            linalg.vecdot                       linalg,out      -            -   mul,sum
inv               linalg.inv                          linalg,out      -            -   matmul
inv_ex            linalg.inv_ex                       linalg,out      -            -   matmul
det               linalg.linalg_det                   linalg,out      -            -   matmul,mul
slogdet           linalg.linalg_slogdet               linalg,out      -            -   matmul,mul
solve             linalg.solve                        linalg,out      -            -   expand,matmul
solve_triangular  linalg.solve_triangular             linalg,out      -            -   expand,matmul,mul
cholesky          linalg.linalg_cholesky              linalg,out      -            -   matmul,mul
cholesky_ex       linalg.cholesky_ex                  linalg,out      -            -   matmul,mul
qr                linalg.linalg_qr                    linalg,out      -            -   matmul,mul,cat
eigh              linalg.eigh                         linalg,out      -            -   matmul,mul,div
eigvalsh          linalg.eigvalsh                     linalg,out      -            -   matmul,mul
svd               linalg.linalg_svd                   linalg,out      -            -   matmul,mul,div
svdvals           linalg.svdvals                      linalg,out      -            -   matmul,mul
pinv              linalg.pinv                         linalg,out      -            -   matmul
lstsq             linalg.lstsq                        linalg          -            -   matmul,mul,sum
matrix_power      linalg.linalg_matrix_power          linalg,out      -            -   matmul
matrix_rank       linalg.matrix_rank                  linalg,out      -            -   -
vector_norm       linalg.vector_norm                  linalg,out      -            -   abs,mul,sum,sqrt,pow_scalar,amax,where
matrix_norm       linalg.matrix_norm                  linalg,out      -            -   abs,sum,amax,vector_norm,svdvals
norm              linalg.linalg_norm                  linalg,out      -            -   vector_norm,matrix_norm
cond              linalg.cond                         linalg,out      -            -   svdvals,matrix_norm,div
# ----- more torch.linalg (_api/linalg_more.py): eig, the LU and LDL families, matrix_exp, ... -----------------
eig               linalg_more.eig                     linalg,out      -            -   matmul,mul,div
eigvals           linalg_more.eigvals                 linalg,out      -            -   matmul,mul,div
lu                linalg_more.lu                      linalg,out      -            -   matmul,mul,cat
lu_factor         linalg_more.lu_factor               linalg,out      -            -   matmul,mul,cat
lu_factor_ex      linalg_more.lu_factor_ex            linalg,out      -            -   matmul,mul,cat
lu_solve          linalg_more.lu_solve                linalg,out      -            -   matmul,mul,expand
solve_ex          linalg_more.solve_ex                linalg,out      -            -   matmul,mul,expand
matrix_exp        linalg_more.matrix_exp              linalg          -            -   cat,slice
householder_product linalg_more.householder_product   linalg,out      -            -   matmul,mul,sub,select
ldl_factor        linalg_more.ldl_factor              linalg,out      -            -   -
ldl_factor_ex     linalg_more.ldl_factor_ex           linalg,out      -            -   -
ldl_solve         linalg_more.ldl_solve               linalg,out      -            -   -
tensorinv         linalg_more.tensorinv               linalg,out      -            -   reshape,matmul
tensorsolve       linalg_more.tensorsolve             linalg,out      -            -   permute,reshape,matmul
vander            linalg_more.vander                  linalg          -            -   expand,cumprod,cat
lu                linalg_more.torch_lu                fn,method       -            -   matmul,mul,cat
lu_unpack         linalg_more.lu_unpack               fn,out          -            -   mul,add
lu_solve          linalg_more.torch_lu_solve          fn,method,out   -            -   matmul,mul,expand
matrix_exp        linalg_more.matrix_exp              fn,method       -            -   cat,slice
vander            linalg_more.torch_vander            fn              -            -   expand,cumprod,cat,index_select
orgqr             linalg_more.orgqr                   fn,method,out   -            -   matmul,mul,sub,select
ormqr             linalg_more.ormqr                   fn,method,out   -            -   matmul,mul,sub,select
geqrf             linalg_more.geqrf                   fn,method,out   -            -   -
cholesky_solve    linalg_more.cholesky_solve          fn,method,out   -            -   matmul,expand
cholesky_inverse  linalg_more.cholesky_inverse        fn,method,out   -            -   matmul,expand
triangular_solve  linalg_more.triangular_solve        fn,method,out   -            -   matmul,expand,mul
igamma            special_more.gammainc               fn,method,out   igamma_      -   numpy,exp,log,lgamma
igammac           special_more.gammaincc              fn,method,out   igammac_     -   numpy,exp,log,lgamma
# ----- torch.special: Bessel, Airy, incomplete gamma, orthogonal polynomials (_api/special_more.py) ----------
bessel_j0         special_more.bessel_j0              special,out     -            -   numpy
bessel_j1         special_more.bessel_j1              special,out     -            -   numpy
bessel_y0         special_more.bessel_y0              special,out     -            -   numpy
bessel_y1         special_more.bessel_y1              special,out     -            -   numpy
modified_bessel_i0 special_more.modified_bessel_i0 special,out - - numpy
modified_bessel_i1 special_more.modified_bessel_i1 special,out - - numpy
modified_bessel_k0 special_more.modified_bessel_k0 special,out - - numpy
modified_bessel_k1 special_more.modified_bessel_k1 special,out - - numpy
scaled_modified_bessel_k0 special_more.scaled_modified_bessel_k0 special,out - - numpy
scaled_modified_bessel_k1 special_more.scaled_modified_bessel_k1 special,out - - numpy
spherical_bessel_j0 special_more.spherical_bessel_j0 special,out - - numpy
airy_ai           special_more.airy_ai                special,out     -            -   numpy
gammainc          special_more.gammainc               special,out     -            -   numpy,exp,log,lgamma
gammaincc         special_more.gammaincc              special,out     -            -   numpy,exp,log,lgamma
chebyshev_polynomial_t special_more.chebyshev_polynomial_t special,out - - numpy
chebyshev_polynomial_u special_more.chebyshev_polynomial_u special,out - - numpy
chebyshev_polynomial_v special_more.chebyshev_polynomial_v special,out - - numpy
chebyshev_polynomial_w special_more.chebyshev_polynomial_w special,out - - numpy
shifted_chebyshev_polynomial_t special_more.shifted_chebyshev_polynomial_t special,out - - numpy
shifted_chebyshev_polynomial_u special_more.shifted_chebyshev_polynomial_u special,out - - numpy
shifted_chebyshev_polynomial_v special_more.shifted_chebyshev_polynomial_v special,out - - numpy
shifted_chebyshev_polynomial_w special_more.shifted_chebyshev_polynomial_w special,out - - numpy
hermite_polynomial_h special_more.hermite_polynomial_h special,out - - numpy
hermite_polynomial_he special_more.hermite_polynomial_he special,out - - numpy
laguerre_polynomial_l special_more.laguerre_polynomial_l special,out - - numpy
legendre_polynomial_p special_more.legendre_polynomial_p special,out - - numpy
# ----- shape ------------------------------------------------------------------------------------------------
reshape           shape.reshape                       fn              -            -   prim
reshape           shape.reshape_method                method          -            -   prim
view              shape.view                          method          -            -   view
view_as           shape.view_as                       method          -            -   view
reshape_as        shape.reshape_as                    method          -            -   reshape
flatten           shape.flatten                       fn,method       -            -   reshape
transpose         shape.transpose                     fn,method       -            -   permute
swapaxes          shape.swapaxes                      fn,method       -            -   permute
swapdims          shape.swapdims                      fn,method       -            -   permute
movedim           shape.movedim                       fn,method       -            -   permute
moveaxis          shape.movedim                       fn,method       -            -   permute
t                 shape.t                             fn,method       -            -   permute
permute           shape.permute                       fn              -            -   prim
permute           shape.permute_method                method          -            -   prim
squeeze           shape.squeeze                       fn,method       -            -   reshape
unsqueeze         shape.unsqueeze                     fn,method       -            -   reshape
expand            shape.expand                        method          -            -   prim
expand_as         shape.expand_as                     method          -            -   expand
broadcast_to      shape.broadcast_to                  fn              -            -   expand
broadcast_to      shape.broadcast_to_method           method          -            -   expand
broadcast_tensors shape.broadcast_tensors             fn              -            -   expand
broadcast_shapes  shape.broadcast_shapes              fn              -            -   -
cat               shape.cat                           fn,out          -            -   prim
concat            shape.cat                           fn,out          -            -   cat
stack             shape.stack                         fn,out          -            -   cat,reshape
split             shape.split                         fn              -            -   slice
split             shape.split_method                  method          -            -   slice
chunk             shape.chunk                         fn,method       -            -   slice
unbind            shape.unbind                        fn,method       -            -   slice
narrow            shape.narrow                        fn,method       -            -   slice
select            shape.select                        fn,method       -            -   slice
unflatten         shape.unflatten                     fn,method       -            -   view
ravel             shape.ravel                         fn,method       -            -   reshape
tensor_split      shape.tensor_split                  fn,method       -            -   slice
hsplit            shape.hsplit                        fn,method       -            -   slice
vsplit            shape.vsplit                        fn,method       -            -   slice
dsplit            shape.dsplit                        fn,method       -            -   slice
atleast_1d        shape.atleast_1d                    fn              -            -   reshape
atleast_2d        shape.atleast_2d                    fn              -            -   reshape
atleast_3d        shape.atleast_3d                    fn              -            -   reshape
hstack            shape.hstack                        fn,out          -            -   cat
vstack            shape.vstack                        fn,out          -            -   cat
row_stack         shape.vstack                        fn,out          -            -   cat
dstack            shape.dstack                        fn,out          -            -   cat
column_stack      shape.column_stack                  fn,out          -            -   cat
meshgrid          shape.meshgrid                      fn              -            -   expand
cartesian_prod    shape.cartesian_prod                fn              -            -   expand,stack
combinations      shape.combinations                  fn              -            -   take
block_diag        shape.block_diag                    fn              -            -   cat
flip              shape.flip                          fn              -            -   take
flip              shape.flip_method                   method          -            -   take
fliplr            shape.fliplr                        fn,method       -            -   take
flipud            shape.flipud                        fn,method       -            -   take
roll              shape.roll                          fn,method       -            -   take
rot90             shape.rot90                         fn,method       -            -   take
repeat            shape.repeat                        method          -            -   take
tile              shape.tile                          fn              -            -   take
tile              shape.tile_method                   method          -            -   take
repeat_interleave shape.repeat_interleave             fn,method       -            -   index_select
unfold            shape.unfold                        method          -            -   slice,view,take
as_strided        shape.as_strided                    fn,method       -            -   take
tril              shape.tril                          fn,method,out   tril_        -   where
triu              shape.triu                          fn,method,out   triu_        -   where
tril_indices      shape.tril_indices                  fn              -            -   copy_from_numpy
triu_indices      shape.triu_indices                  fn              -            -   copy_from_numpy
diagonal          shape.diagonal                      fn,method       -            -   view,slice,take
diag              shape.diag                          fn,method,out   -            -   put,take
diag_embed        shape.diag_embed                    fn,method       -            -   put
diagflat          shape.diagflat                      fn,method       -            -   put
select_scatter    shape.select_scatter                fn,method       -            -   put
slice_scatter     shape.slice_scatter                 fn,method       -            -   put
diagonal_scatter  shape.diagonal_scatter              fn,method       -            -   put
cdist             shape.cdist                         fn              -            -   sub,abs,sum,pow_scalar,amax
trapezoid         shape.trapezoid                     fn              -            -   slice,add,mul,sum
trapz             shape.trapezoid                     fn              -            -   slice,add,mul,sum
unsqueeze_        shape.unsqueeze_                    method          -            -   reshape,assign_inplace
squeeze_          shape.squeeze_                      method          -            -   reshape,assign_inplace
t_                shape.t_                            method          -            -   permute,assign_inplace
transpose_        shape.transpose_                    method          -            -   permute,assign_inplace
swapdims_         shape.swapdims_                     method          -            -   permute,assign_inplace
swapaxes_         shape.swapaxes_                     method          -            -   permute,assign_inplace
as_strided_       shape.as_strided_                   method          -            -   take,assign_inplace
clone             shape.clone                         fn,method       -            -   prim
contiguous        shape.contiguous                    method          -            -   clone
T                 shape.T                             prop            -            -   permute
mT                shape.mT                            prop            -            -   permute
# ----- indexing ---------------------------------------------------------------------------------------------
__getitem__       indexing.getitem                    op              -            hot slice,take
__setitem__       indexing.setitem                    op              -            -   put,copy_
gather            indexing.gather                     fn,method,out   -            -   prim
index_select      indexing.index_select               fn,method,out   -            -   prim
take_along_dim    indexing.take_along_dim             fn,method,out   -            -   gather,take
scatter           indexing.scatter                    fn,method,out   scatter_     -   put,take
scatter_add       indexing.scatter_add                fn,method,out   scatter_add_ -   add,prim
scatter_reduce    indexing.scatter_reduce             fn,method,out   scatter_reduce_ -   take,cat,sum,amax,put
index_put         indexing.index_put                  fn,method       index_put_   -   put,put_add
index_fill        indexing.index_fill                 fn,method       index_fill_  -   put
index_copy        indexing.index_copy                 fn,method,out   index_copy_  -   put
index_add         indexing.index_add                  fn,method,out   index_add_   -   index_add,add
masked_select     indexing.masked_select              fn,method,out   -            -   take
masked_scatter    indexing.masked_scatter             fn,method       masked_scatter_ -   put,take
nonzero           indexing.nonzero                    fn,method,out   -            -   -
argwhere          indexing.argwhere                   fn,method       -            -   -
searchsorted      indexing.searchsorted               fn,out          -            -   -
bucketize         indexing.bucketize                  fn,out          -            -   -
take              indexing.take                       fn,method,out   -            -   prim
masked_fill       indexing.masked_fill                fn,method       masked_fill_ -   masked_fill,expand
# ----- neural-net layers (also nn.functional) ---------------------------------------------------------------
linear            nn_ops.linear                       fn,F            -            hot matmul,add
bilinear          nn_ops.bilinear                     fn,F            -            -   matmul,mul,sum
embedding         nn_ops.embedding                    fn,F            -            -   index_select
one_hot           nn_ops.one_hot                      fn,F            -            -   -
# ----- convolutions (also nn.functional; _api/conv.py) ---------------------------------------------------------
conv1d            conv.conv1d                         fn,F            -            -   conv2d,unsqueeze,squeeze
conv2d            conv.conv2d                         fn,F            -            -   conv2d
conv_transpose1d  conv.conv_transpose1d               fn,F            -            -   matmul,fold,add
conv_transpose2d  conv.conv_transpose2d               fn,F            -            -   matmul,fold,add
unfold            conv.unfold                         F               -            -   unfold
fold              conv.fold                           F               -            -   fold
# ----- pooling, padding, resampling (also nn.functional) ----------------------------------------------------
max_pool1d        pooling.max_pool1d                  fn,F            -            -   max_pool2d,index_select,gather
max_pool2d        pooling.max_pool2d                  fn,F            -            -   max_pool2d,index_select,gather
max_pool1d_with_indices pooling.max_pool1d_with_indices fn,F          -            -   index_select,gather
max_pool2d_with_indices pooling.max_pool2d_with_indices F             -            -   index_select,gather
avg_pool1d        pooling.avg_pool1d                  fn,F            -            -   avg_pool2d,index_select,sum
avg_pool2d        pooling.avg_pool2d                  fn,F            -            -   avg_pool2d,index_select,sum
adaptive_avg_pool1d pooling.adaptive_avg_pool1d       fn,F            -            -   avg_pool2d,index_select,sum
adaptive_avg_pool2d pooling.adaptive_avg_pool2d       F               -            -   avg_pool2d,index_select,sum
adaptive_max_pool1d pooling.adaptive_max_pool1d       F               -            -   max_pool2d,index_select,gather
adaptive_max_pool2d pooling.adaptive_max_pool2d       F               -            -   max_pool2d,index_select,gather
adaptive_max_pool1d_with_indices pooling.adaptive_max_pool1d_with_indices F - -        index_select,gather
adaptive_max_pool2d_with_indices pooling.adaptive_max_pool2d_with_indices F - -        index_select,gather
lp_pool1d         pooling.lp_pool1d                   F               -            -   avg_pool2d,pow_scalar
lp_pool2d         pooling.lp_pool2d                   F               -            -   avg_pool2d,pow_scalar
max_unpool1d      pooling.max_unpool1d                F               -            -   put
max_unpool2d      pooling.max_unpool2d                F               -            -   put
max_pool3d        pooling.max_pool3d                  fn,F            -            -   index_select,gather
max_pool3d_with_indices pooling.max_pool3d_with_indices F             -            -   index_select,gather
avg_pool3d        pooling.avg_pool3d                  F               -            -   index_select,sum
adaptive_avg_pool3d pooling.adaptive_avg_pool3d       F               -            -   index_select,sum
adaptive_max_pool3d pooling.adaptive_max_pool3d       F               -            -   index_select,gather
adaptive_max_pool3d_with_indices pooling.adaptive_max_pool3d_with_indices F - -        index_select,gather
lp_pool3d         pooling.lp_pool3d                   F               -            -   index_select,pow_scalar
max_unpool3d      pooling.max_unpool3d                F               -            -   put
pad               padding.pad                         F               -            -   slice,cat,index_select
interpolate       resample.interpolate                F               -            -   index_select,mul,add
upsample          resample.upsample                   F               -            -   index_select,mul,add
upsample_nearest  resample.upsample_nearest           F               -            -   index_select
upsample_bilinear resample.upsample_bilinear          F               -            -   index_select,mul,add
pixel_shuffle     resample.pixel_shuffle              fn,F            -            -   reshape,permute
pixel_unshuffle   resample.pixel_unshuffle            fn,F            -            -   reshape,permute
channel_shuffle   resample.channel_shuffle            fn,F            -            -   reshape,permute
embedding_bag     embedding_bag.embedding_bag         F               -            -   index_select,index_add,gather
# ----- vision ops (issues 10 and 14): 3-d convolutions, sampling grids, fractional pooling ------------------
conv3d            conv.conv3d                         fn,F            -            -   index_select,conv2d
conv_transpose3d  conv.conv_transpose3d               fn,F            -            -   matmul,fold,index_add
affine_grid       sampling.affine_grid                F               -            -   matmul
grid_sample       sampling.grid_sample                F               -            -   gather,mul,add
gumbel_softmax    sampling.gumbel_softmax             F               -            -   rand,softmax
fractional_max_pool2d pooling.fractional_max_pool2d   F               -            -   gather
fractional_max_pool3d pooling.fractional_max_pool3d   F               -            -   gather
fractional_max_pool2d_with_indices pooling.fractional_max_pool2d_with_indices F - -        gather
fractional_max_pool3d_with_indices pooling.fractional_max_pool3d_with_indices F - -        gather
native_channel_shuffle resample.native_channel_shuffle fn,F           -            -   reshape,permute
conv_tbc          conv.conv_tbc                       fn,F            -            -   conv2d,permute
# ----- end of vision ops -----------------------------------------------------------------------------------
# ----- activations (also nn.functional; the F.NAME_ rows are torch's in-place forms) ------------------------
softmax           activation.softmax_fn               fn,method,out   -            -   prim
softmax           activation.softmax                  F               -            -   prim
log_softmax       activation.log_softmax_fn           fn,method,out   -            -   prim
log_softmax       activation.log_softmax              F               -            -   prim
softmin           activation.softmin                  F               -            -   softmax,neg
relu              activation.relu                     F               -            -   relu
relu_             activation.relu_                    fn,F            -            -   relu,assign_inplace
relu6             activation.relu6                    F               -            -   where,clamp
leaky_relu        activation.leaky_relu               fn,method,F     leaky_relu_  -   prim
leaky_relu_       activation.leaky_relu_              F               -            -   leaky_relu,assign_inplace
hardtanh          activation.hardtanh                 F               -            -   where,clamp
hardtanh_         activation.hardtanh_                F               -            -   where,clamp,assign_inplace
elu               activation.elu                      F               -            -   where,exp
elu_              activation.elu_                     F               -            -   where,exp,assign_inplace
selu              activation.selu_fn                  fn              -            -   where,exp
selu              activation.selu                     F               -            -   where,exp
selu_             activation.selu_                    fn,F            -            -   where,exp,assign_inplace
celu              activation.celu_fn                  fn              -            -   where,exp
celu              activation.celu                     F               -            -   where,exp
celu_             activation.celu_                    fn,F            -            -   where,exp,assign_inplace
rrelu             activation.rrelu_fn                 fn              -            -   where,rand,leaky_relu
rrelu             activation.rrelu                    F               -            -   where,rand,leaky_relu
rrelu_            activation.rrelu_fn_inplace         fn              -            -   where,rand,assign_inplace
rrelu_            activation.rrelu_                   F               -            -   where,rand,assign_inplace
prelu             activation.prelu                    fn,method,F     -            -   where,mul
threshold         activation.threshold_fn             fn              -            -   where
threshold         activation.threshold                F               -            -   where
threshold_        activation.threshold_               fn,F            -            -   where,assign_inplace
gelu              activation.gelu                     fn,method,F     -            -   prim,tanh
softplus          activation.softplus                 fn,method,F     -            -   prim
silu              activation.silu                     F               -            -   sigmoid,mul
mish              activation.mish                     F               -            -   softplus,tanh,mul
logsigmoid        activation.logsigmoid               F               -            -   softplus
hardsigmoid       activation.hardsigmoid              F               -            -   where,clamp
hardswish         activation.hardswish                F               -            -   where,mul
softsign          activation.softsign                 F               -            -   abs,div
tanhshrink        activation.tanhshrink               F               -            -   tanh,sub
softshrink        activation.softshrink               F               -            -   where
hardshrink        activation.hardshrink               fn,method,F     -            -   where
glu               activation.glu                      F               -            -   chunk,sigmoid,mul
# ----- dropout ------------------------------------------------------------------------------------------------
dropout           dropout.dropout                     fn,F            -            -   bernoulli_mask,mul
dropout_          dropout.dropout_                    fn              -            -   bernoulli_mask,mul,assign_inplace
dropout1d         dropout.dropout1d                   F               -            -   bernoulli_mask,mul
dropout2d         dropout.dropout2d                   F               -            -   bernoulli_mask,mul
dropout3d         dropout.dropout3d                   F               -            -   bernoulli_mask,mul
alpha_dropout     dropout.alpha_dropout_fn            fn              -            -   bernoulli_mask,mul,add
alpha_dropout     dropout.alpha_dropout               F               -            -   bernoulli_mask,mul,add
alpha_dropout_    dropout.alpha_dropout_              fn              -            -   bernoulli_mask,assign_inplace
feature_alpha_dropout dropout.feature_alpha_dropout_fn fn             -            -   bernoulli_mask,mul,add
feature_alpha_dropout dropout.feature_alpha_dropout   F               -            -   bernoulli_mask,mul,add
feature_alpha_dropout_ dropout.feature_alpha_dropout_ fn              -            -   bernoulli_mask,assign_inplace
# ----- losses -------------------------------------------------------------------------------------------------
cross_entropy     loss.cross_entropy                  fn,F            -            hot prim,log_softmax,gather
nll_loss          loss.nll_loss                       fn,F            -            -   gather,where
mse_loss          loss.mse_loss                       fn,F            -            -   sub,mul,mean
l1_loss           loss.l1_loss                        F               -            -   sub,abs,mean
smooth_l1_loss    loss.smooth_l1_loss                 F               -            -   sub,abs,where
huber_loss        loss.huber_loss                     F               -            -   sub,abs,where
binary_cross_entropy loss.binary_cross_entropy        F               -            -   _record_function,log
binary_cross_entropy_with_logits loss.binary_cross_entropy_with_logits_fn fn -         -   softplus,mul
binary_cross_entropy_with_logits loss.binary_cross_entropy_with_logits F  -            -   softplus,mul
kl_div            loss.kl_div_fn                      fn              -            -   exp,log,where
kl_div            loss.kl_div                         F               -            -   exp,log,where
poisson_nll_loss  loss.poisson_nll_loss_fn            fn              -            -   exp,log,where
poisson_nll_loss  loss.poisson_nll_loss               F               -            -   exp,log,where
gaussian_nll_loss loss.gaussian_nll_loss              F               -            -   log,div,clamp
soft_margin_loss  loss.soft_margin_loss               F               -            -   softplus
multilabel_soft_margin_loss loss.multilabel_soft_margin_loss F        -            -   softplus,sum
multilabel_margin_loss loss.multilabel_margin_loss    F               -            -   relu,mul,sum
multi_margin_loss loss.multi_margin_loss              F               -            -   gather,relu,where
margin_ranking_loss loss.margin_ranking_loss_fn       fn              -            -   clamp
margin_ranking_loss loss.margin_ranking_loss          F               -            -   clamp
hinge_embedding_loss loss.hinge_embedding_loss_fn     fn              -            -   clamp,where
hinge_embedding_loss loss.hinge_embedding_loss        F               -            -   clamp,where
cosine_embedding_loss loss.cosine_embedding_loss_fn   fn              -            -   sum,sqrt,where
cosine_embedding_loss loss.cosine_embedding_loss      F               -            -   sum,sqrt,where
triplet_margin_loss loss.triplet_margin_loss_fn       fn              -            -   sum,sqrt,clamp
triplet_margin_loss loss.triplet_margin_loss          F               -            -   sum,sqrt,clamp
triplet_margin_with_distance_loss loss.triplet_margin_with_distance_loss F -          -   clamp,minimum
ctc_loss          loss.ctc_loss_fn                    fn              -            -   _record_function
ctc_loss          loss.ctc_loss                       F               -            -   _record_function
# ----- normalisation ------------------------------------------------------------------------------------------
batch_norm        normalization.batch_norm_fn         fn              -            -   mean,var,rsqrt,copy_
batch_norm        normalization.batch_norm            F               -            -   mean,var,rsqrt,copy_
instance_norm     normalization.instance_norm_fn      fn              -            -   mean,var,rsqrt,copy_
instance_norm     normalization.instance_norm         F               -            -   mean,var,rsqrt,copy_
group_norm        normalization.group_norm_fn         fn              -            -   mean,var,rsqrt
group_norm        normalization.group_norm            F               -            -   mean,var,rsqrt
layer_norm        normalization.layer_norm_fn         fn              -            -   mean,sub,mul,rsqrt
layer_norm        normalization.layer_norm            F               -            -   mean,sub,mul,rsqrt
rms_norm          normalization.rms_norm              fn,F            -            -   mean,mul,rsqrt
local_response_norm normalization.local_response_norm F               -            -   cat,slice,pow_scalar,div
normalize         normalization.normalize             F               -            -   sum,pow_scalar,div
# ----- distances and attention --------------------------------------------------------------------------------
cosine_similarity distance.cosine_similarity          fn,F            -            -   sum,sqrt,div
pairwise_distance distance.pairwise_distance          fn,F            -            -   sum,sqrt
pdist             distance.pdist                      fn,F            -            -   index_select,sum,sqrt
scaled_dot_product_attention attention.scaled_dot_product_attention F -           -   matmul,softmax,where
multi_head_attention_forward attention.multi_head_attention_forward F -           -   matmul,softmax,linear
# ----- issue 10, the names a training script meets (misc.py) -----------------------------------------------------
isin              misc.isin                           fn              -            -   -
logspace          misc.logspace                       fn,out          -            -   empty
range             misc.range                          fn,out          -            -   empty
scalar_tensor     misc.scalar_tensor                  fn              -            -   full
asarray           misc.asarray                        fn              -            -   from_numpy,copy_from_numpy
frombuffer        misc.frombuffer                     fn              -            -   from_numpy
empty_strided     misc.empty_strided                  fn              -            -   full,from_numpy
concatenate       misc.concatenate                    fn,out          -            -   cat
unravel_index     misc.unravel_index                  fn              -            -   -
diff              misc.diff                           fn,method       -            -   slice,sub,cat
cov               misc.cov                            fn,method       -            -   mean,sub,mul,matmul,div
corrcoef          misc.corrcoef                       fn,method       -            -   cov,sqrt,div,clamp
dist              misc.dist                           fn,method       -            -   sub,vector_norm
renorm            misc.renorm                         fn,method,out   renorm_      -   vector_norm,div,where,mul
gcd               misc.gcd                            fn,method,out   gcd_         -   -
lcm               misc.lcm                            fn,method,out   lcm_         -   -
ldexp             misc.ldexp                          fn,method,out   ldexp_       -   pow,mul
frexp             misc.frexp                          fn,method       -            -   numpy
nextafter         misc.nextafter                      fn,method,out   nextafter_   -   sub,add
split_with_sizes  misc.split_with_sizes               fn,method       -            -   split
unsafe_chunk      misc.unsafe_chunk                   fn,method       -            -   chunk
unsafe_split      misc.unsafe_split                   fn              -            -   split
unsafe_split      misc.unsafe_split_method            method          -            -   split
is_nonzero        misc.is_nonzero                     fn,method       -            -   -
is_same_size      misc.is_same_size                   fn,method       -            -   -
is_signed         misc.is_signed                      fn,method       -            -   -
is_complex        misc.is_complex                     fn,method       -            -   -
fill_             misc.fill_                          fn              -            -   fill_
zero_             misc.zero_                          fn              -            -   zero_
fill_diagonal_    misc.fill_diagonal_                 method          -            -   put,assign_inplace
sum_to_size       misc.sum_to_size                    method          -            -   sum,reshape
nbytes            misc.nbytes                         prop            -            -   -
itemsize          misc.itemsize                       prop            -            -   -
new               misc.new                            method          -            -   empty,copy_from_numpy
greater           pointwise.gt                        fn,method,out   greater_     -   compare
greater_equal     pointwise.ge                        fn,method,out   greater_equal_ - compare
less              pointwise.lt                        fn,method,out   less_        -   compare
less_equal        pointwise.le                        fn,method,out   less_equal_  -   compare
not_equal         pointwise.ne                        fn,method,out   not_equal_   -   compare
detach            misc.detach                         fn              -            -   -
fill              misc.fill                           fn              -            -   full,expand
angle             misc.angle                          fn,method,out   -            -   numpy
imag              misc.imag                           fn              -            -   -
get_device        misc.get_device                     fn              -            -   -
unsafe_split_with_sizes misc.unsafe_split_with_sizes  fn,method       -            -   split
nonzero_static    misc.nonzero_static                 fn,method       -            -   -
as_strided_scatter misc.as_strided_scatter            fn,method       -            -   put
is_sparse         misc.is_sparse                      prop            -            -   -
is_sparse_csr     misc.is_sparse_csr                  prop            -            -   -
is_quantized      misc.is_quantized                   prop            -            -   -
is_nested         misc.is_nested                      prop            -            -   -
is_mkldnn         misc.is_mkldnn                      prop            -            -   -
is_mps            misc.is_mps                         prop            -            -   -
is_xpu            misc.is_xpu                         prop            -            -   -
is_xla            misc.is_xla                         prop            -            -   -
is_ipu            misc.is_ipu                         prop            -            -   -
is_vulkan         misc.is_vulkan                      prop            -            -   -
is_maia           misc.is_maia                        prop            -            -   -
is_mtia           misc.is_mtia                        prop            -            -   -
is_pinned         misc.is_pinned                      method          -            -   -
pin_memory        misc.pin_memory                     method          -            -   -
is_inference      misc.is_inference                   fn,method       -            -   -
to_dense          misc.to_dense                       method          -            -   to_dtype
dim_order         misc.dim_order                      method          -            -   -
const_data_ptr    misc.const_data_ptr                 method          -            -   -
new_empty_strided misc.new_empty_strided              method          -            -   full,from_numpy
vmap              misc.vmap                           fn              -            -   select,stack
# ----- issue 10: histograms, numerical calculus, windows, index_reduce, put, real-tensor identities, *_copy views,
# ----- apply_/map_, DLPack (numeric.py) ---------------------------------------------------------------------------
histogram         numeric.histogram                   fn,method,out   -            -   -
histogramdd       numeric.histogramdd                 fn              -            -   -
cumulative_trapezoid numeric.cumulative_trapezoid     fn              -            -   slice,add,mul,cumsum
gradient          numeric.gradient                    fn              -            -   index_select,mul,add
hann_window       numeric.hann_window                 fn              -            -   copy_from_numpy
hamming_window    numeric.hamming_window              fn              -            -   copy_from_numpy
blackman_window   numeric.blackman_window             fn              -            -   copy_from_numpy
bartlett_window   numeric.bartlett_window             fn              -            -   copy_from_numpy
kaiser_window     numeric.kaiser_window               fn              -            -   copy_from_numpy
index_reduce      numeric.index_reduce                fn,method,out   index_reduce_ -  scatter_reduce
put               numeric.put                         fn,method       put_         -   put,put_add
is_conj           numeric.is_conj                     fn,method       -            -   -
is_neg            numeric.is_neg                      fn,method       -            -   -
resolve_conj      numeric.resolve_conj                fn,method       -            -   -
resolve_neg       numeric.resolve_neg                 fn,method       -            -   -
conj              numeric.conj                        fn,method       -            -   -
conj_physical     numeric.conj_physical               fn,method,out   -            -   -
conj_physical_    numeric.conj_physical_              method          -            -   -
adjoint           numeric.adjoint                     fn,method       -            -   mT
real              numeric.real                        fn,prop         -            -   -
imag              numeric.imag                        prop            -            -   -
H                 numeric.H                           prop            -            -   mT
mH                numeric.mH                          prop            -            -   mT
as_strided_copy   numeric.COPY_FORMS                  fn,out          -            -   take,clone
diagonal_copy     numeric.COPY_FORMS                  fn,out          -            -   view,clone
expand_copy       numeric.COPY_FORMS                  fn,out          -            -   expand,clone
permute_copy      numeric.COPY_FORMS                  fn,out          -            -   permute,clone
select_copy       numeric.COPY_FORMS                  fn,out          -            -   select,clone
slice_copy        numeric.COPY_FORMS                  fn,out          -            -   slice,clone
squeeze_copy      numeric.COPY_FORMS                  fn,out          -            -   reshape,clone
t_copy            numeric.COPY_FORMS                  fn,out          -            -   permute,clone
transpose_copy    numeric.COPY_FORMS                  fn,out          -            -   permute,clone
unbind_copy       numeric.COPY_FORMS                  fn              -            -   select,clone
unfold_copy       numeric.COPY_FORMS                  fn,out          -            -   unfold,clone
unsqueeze_copy    numeric.COPY_FORMS                  fn,out          -            -   reshape,clone
view_copy         numeric.COPY_FORMS                  fn,out          -            -   view,clone
split_copy        numeric.COPY_FORMS                  fn              -            -   split,clone
split_with_sizes_copy numeric.COPY_FORMS              fn              -            -   split,clone
detach_copy       numeric.COPY_FORMS                  fn,out          -            -   clone
alias_copy        numeric.COPY_FORMS                  fn,out          -            -   clone
narrow_copy       numeric.COPY_FORMS                  fn,out          -            -   slice,clone
narrow_copy       numeric.narrow_copy_method          method          -            -   slice,clone
apply_            numeric.apply_                      method          -            -   assign_inplace
map_              numeric.map_                        method          -            -   assign_inplace
map2_             numeric.map2_                       method          -            -   assign_inplace
from_dlpack       numeric.from_dlpack                 fn              -            -   from_numpy
to_dlpack         numeric.to_dlpack                   fn              -            -   -
__dlpack__        numeric.__dlpack__                  op              -            -   -
__dlpack_device__ numeric.__dlpack_device__           op              -            -   -
# ----- compile (eager by design: returns its argument; Note [compile is the identity], _api/compiling.py) ------
compile           compiling.compile                   fn              -            -   -
# ----- Tensor: the core (each engine's _C.Tensor) -----------------------------------------------------------
shape             core                                prop            -            -   -
dtype             core                                prop            -            -   -
ndim              core                                prop            -            -   -
dim               core                                method          -            -   -
numel             core                                method          -            -   -
size              core                                method          -            -   -
stride            core                                method          -            -   -
storage_offset    core                                method          -            -   -
element_size      core                                method          -            -   -
is_contiguous     core                                method          -            -   -
data_ptr          core                                method          -            -   -
requires_grad     core                                prop            -            -   -
grad              core                                prop            -            -   -
grad_fn           core                                prop            -            -   -
is_leaf           core                                prop            -            -   -
output_nr         core                                prop            -            -   -
retains_grad      core                                prop            -            -   -
data              core                                prop            -            -   -
item              core                                method          -            -   -
detach            core                                method          -            -   -
detach_           core                                method          -            -   -
retain_grad       core                                method          -            -   -
register_hook     core                                method          -            -   -
register_post_accumulate_grad_hook core                                method          -            -   -
# ----- Tensor: conversions and Python protocols -------------------------------------------------------------
__init__          tensor_methods.__init__             op              -            -   -
FloatTensor       tensor_methods.FloatTensor          fn              -            -   to_dtype
DoubleTensor      tensor_methods.DoubleTensor         fn              -            -   to_dtype
LongTensor        tensor_methods.LongTensor           fn              -            -   to_dtype
BoolTensor        tensor_methods.BoolTensor           fn              -            -   to_dtype
IntTensor         tensor_methods.IntTensor            fn              -            -   to_dtype
ShortTensor       tensor_methods.ShortTensor          fn              -            -   to_dtype
CharTensor        tensor_methods.CharTensor           fn              -            -   to_dtype
ByteTensor        tensor_methods.ByteTensor           fn              -            -   to_dtype
HalfTensor        tensor_methods.HalfTensor           fn              -            -   to_dtype
BFloat16Tensor    tensor_methods.BFloat16Tensor       fn              -            -   to_dtype
__repr__          tensor_methods.__repr__             op              -            -   -
__str__           tensor_methods.__repr__             op              -            -   -
__format__        tensor_methods.__format__           op              -            -   -
__len__           tensor_methods.__len__              op              -            -   -
__iter__          tensor_methods.__iter__             op              -            -   select
__bool__          tensor_methods.__bool__             op              -            -   -
__float__         tensor_methods.__float__            op              -            -   -
__int__           tensor_methods.__int__              op              -            -   -
__complex__       tensor_methods.__complex__          op              -            -   -
__index__         tensor_methods.__index__            op              -            -   -
__contains__      tensor_methods.__contains__         op              -            -   compare,sum
__array__         tensor_methods.__array__            op              -            -   -
__reduce_ex__     tensor_methods.__reduce_ex__        op              -            -   copy_from_numpy
__deepcopy__      tensor_methods.__deepcopy__         op              -            -   copy_from_numpy
tolist            tensor_methods.tolist               method          -            -   -
numpy             tensor_methods.numpy                method          -            -   -
to                tensor_methods.to                   method          -            -   to_dtype
type              tensor_methods.type_method          method          -            -   to_dtype
type_as           tensor_methods.type_as              method          -            -   to_dtype
float             tensor_methods.to_float32           method          -            -   to_dtype
double            tensor_methods.to_float64           method          -            -   to_dtype
long              tensor_methods.to_int64             method          -            -   to_dtype
int               tensor_methods.to_int32             method          -            -   to_dtype
bool              tensor_methods.to_bool              method          -            -   to_dtype
short             tensor_methods.to_int16             method          -            -   to_dtype
char              tensor_methods.to_int8              method          -            -   to_dtype
byte              tensor_methods.to_uint8             method          -            -   to_dtype
half              tensor_methods.to_float16           method          -            -   to_dtype
bfloat16          tensor_methods.to_bfloat16          method          -            -   to_dtype
cpu               tensor_methods.cpu                  method          -            -   -
cuda              device.cuda                         method          -            -   -
device            device.tensor_device                prop            -            -   -
is_cpu            device.is_cpu                       prop            -            -   -
is_cuda           device.is_cuda                      prop            -            -   -
is_meta           device.is_meta                      prop            -            -   -
get_device        device.get_device                   method          -            -   -
ndimension        tensor_methods.ndimension           method          -            -   -
nelement          tensor_methods.nelement             method          -            -   -
is_floating_point tensor_methods.is_floating_point    method          -            -   -
requires_grad_    tensor_methods.requires_grad_       method          -            -   -
backward          tensor_methods.backward             method          -            -   _run_backward
zero_             tensor_methods.zero_                method          -            -   zero_
fill_             tensor_methods.fill_                method          -            -   fill_
copy_             tensor_methods.copy_                method          -            -   copy_
uniform_          tensor_methods.uniform_             method          -            -   rand
normal_           tensor_methods.normal_              method          -            -   randn
bernoulli_        tensor_methods.bernoulli_           method          -            -   rand,compare
# ----- autocast: torch.autocast and its thread-local state (Note [Autocast] in _api/autocast.py) -------------
autocast          autocast.autocast                   fn              -            -   -
is_autocast_enabled autocast.is_autocast_enabled      fn              -            -   -
set_autocast_enabled autocast.set_autocast_enabled    fn              -            -   -
get_autocast_dtype autocast.get_autocast_dtype        fn              -            -   -
set_autocast_dtype autocast.set_autocast_dtype        fn              -            -   -
is_autocast_cpu_enabled autocast.is_autocast_cpu_enabled fn           -            -   -
set_autocast_cpu_enabled autocast.set_autocast_cpu_enabled fn         -            -   -
get_autocast_cpu_dtype autocast.get_autocast_cpu_dtype fn             -            -   -
set_autocast_cpu_dtype autocast.set_autocast_cpu_dtype fn             -            -   -
get_autocast_gpu_dtype autocast.get_autocast_gpu_dtype fn             -            -   -
set_autocast_gpu_dtype autocast.set_autocast_gpu_dtype fn             -            -   -
is_autocast_cache_enabled autocast.is_autocast_cache_enabled fn       -            -   -
set_autocast_cache_enabled autocast.set_autocast_cache_enabled fn     -            -   -
clear_autocast_cache autocast.clear_autocast_cache    fn              -            -   -
autocast_increment_nesting autocast.autocast_increment_nesting fn     -            -   -
autocast_decrement_nesting autocast.autocast_decrement_nesting fn     -            -   -
# ----- Tensor: operators ------------------------------------------------------------------------------------
__add__           tensor_methods.OPERATORS            op              -            hot add
__radd__          tensor_methods.OPERATORS            op              -            hot add
__sub__           tensor_methods.OPERATORS            op              -            hot sub
__rsub__          tensor_methods.OPERATORS            op              -            hot sub
__mul__           tensor_methods.OPERATORS            op              -            hot mul
__rmul__          tensor_methods.OPERATORS            op              -            hot mul
__truediv__       tensor_methods.OPERATORS            op              -            hot div
__rtruediv__      tensor_methods.OPERATORS            op              -            hot div
__matmul__        tensor_methods.OPERATORS            op              -            hot matmul
__rmatmul__       tensor_methods.OPERATORS            op              -            hot matmul
__pow__           tensor_methods.OPERATORS            op              -            -   pow,pow_scalar
__rpow__          tensor_methods.OPERATORS            op              -            -   pow
__neg__           tensor_methods.OPERATORS            op              -            -   neg
__pos__           tensor_methods.OPERATORS            op              -            -   -
__abs__           tensor_methods.OPERATORS            op              -            -   abs
__invert__        tensor_methods.OPERATORS            op              -            -   bitwise_not
__and__           tensor_methods.OPERATORS            op              -            -   bitwise_and
__rand__          tensor_methods.OPERATORS            op              -            -   bitwise_and
__or__            tensor_methods.OPERATORS            op              -            -   bitwise_or
__ror__           tensor_methods.OPERATORS            op              -            -   bitwise_or
__xor__           tensor_methods.OPERATORS            op              -            -   bitwise_xor
__rxor__          tensor_methods.OPERATORS            op              -            -   bitwise_xor
__lshift__        tensor_methods.OPERATORS            op              -            -   bitwise_left_shift
__rlshift__       tensor_methods.OPERATORS            op              -            -   bitwise_left_shift
__rshift__        tensor_methods.OPERATORS            op              -            -   bitwise_right_shift
__rrshift__       tensor_methods.OPERATORS            op              -            -   bitwise_right_shift
__mod__           tensor_methods.OPERATORS            op              -            -   remainder
__rmod__          tensor_methods.OPERATORS            op              -            -   remainder
__floordiv__      tensor_methods.OPERATORS            op              -            -   floor_divide
__rfloordiv__     tensor_methods.OPERATORS            op              -            -   floor_divide
__eq__            tensor_methods.OPERATORS            op              -            -   compare
__ne__            tensor_methods.OPERATORS            op              -            -   compare
__lt__            tensor_methods.OPERATORS            op              -            -   compare
__le__            tensor_methods.OPERATORS            op              -            -   compare
__gt__            tensor_methods.OPERATORS            op              -            -   compare
__ge__            tensor_methods.OPERATORS            op              -            -   compare
__iadd__          tensor_methods.INPLACE_OPERATORS    op              -            -   add
__isub__          tensor_methods.INPLACE_OPERATORS    op              -            -   sub
__imul__          tensor_methods.INPLACE_OPERATORS    op              -            -   mul
__itruediv__      tensor_methods.INPLACE_OPERATORS    op              -            -   div
__imod__          tensor_methods.INPLACE_OPERATORS    op              -            -   remainder
__ifloordiv__     tensor_methods.INPLACE_OPERATORS    op              -            -   floor_divide
__iand__          tensor_methods.INPLACE_OPERATORS    op              -            -   bitwise_and
__ior__           tensor_methods.INPLACE_OPERATORS    op              -            -   bitwise_or
__ixor__          tensor_methods.INPLACE_OPERATORS    op              -            -   bitwise_xor
__ilshift__       tensor_methods.INPLACE_OPERATORS    op              -            -   bitwise_left_shift
__irshift__       tensor_methods.INPLACE_OPERATORS    op              -            -   bitwise_right_shift
"""

# ----- torch.X_: the function forms of the in-place Tensor methods (torch.abs_(x) is x.abs_()), one row each, made
# by rows() from this list (impl inplace_functions.FUNCTIONS, kind fn, uses the method)
INPLACE_FUNCTIONS = """
abs_ acos_ acosh_ addmv_ arccos_ arccosh_ arcsin_ arcsinh_ arctan_ arctanh_ as_strided_ asin_ asinh_ atan_ atanh_
ceil_ clamp_ clamp_max_ clamp_min_ clip_ cos_ cosh_ deg2rad_ detach_ erf_ erfc_ exp2_ exp_ expm1_ fix_ floor_ frac_
gcd_ i0_ index_put_ lcm_ ldexp_ log10_ log1p_ log2_ log_ logit_ nan_to_num_ neg_ negative_ rad2deg_ reciprocal_
round_ rsqrt_ sigmoid_ sin_ sinc_ sinh_ sqrt_ square_ tan_ tanh_ trunc_ xlogy_ conj_physical_
""".split()


KINDS = ("fn", "method", "prop", "op", "F", "special", "linalg", "out")


class Row:
    __slots__ = ("name", "impl", "kinds", "inplace", "hot", "uses")

    def __init__(self, name, impl, kinds, inplace, hot, uses):
        self.name, self.impl, self.kinds = name, impl, tuple(kinds.split(","))
        self.inplace = None if inplace == "-" else inplace
        self.hot = hot == "hot"
        self.uses = () if uses == "-" else tuple(uses.split(","))
        bad = [k for k in self.kinds if k not in KINDS]
        if bad:
            raise ValueError(f"api table: row {name}: unknown kind {bad[0]!r} (expected one of {KINDS})")

    def __repr__(self):
        return f"Row({self.name!r}, {self.impl!r}, kinds={self.kinds})"


def rows():
    """The table's rows, in order."""
    out = []
    for line in TABLE.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        cells = line.split()
        if len(cells) != 6:
            raise ValueError(f"api table: expected 6 columns, got {len(cells)} in: {line}")
        out.append(Row(*cells))
    out += [Row(name, "inplace_functions.FUNCTIONS", "fn", "-", "-", "Tensor." + name) for name in INPLACE_FUNCTIONS]
    seen = {}
    for row in out:     # one row per (name, kind): a second one would silently replace the first
        for kind in row.kinds:
            if kind == "out":       # a flag on the row's namespaces, not a namespace of its own
                continue
            if (row.name, kind) in seen:
                raise ValueError(f"api table: {row.name} ({kind}) is declared twice: {seen[row.name, kind].impl} and "
                                 f"{row.impl}")
            seen[row.name, kind] = row
    return out
