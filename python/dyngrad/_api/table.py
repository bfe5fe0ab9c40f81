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
            F (nn.functional.NAME), special (dyngrad.special.NAME), linalg (dyngrad.linalg.NAME), masked
            (dyngrad.masked.NAME); out: dyngrad.NAME,
            special.NAME and linalg.NAME take torch's out= (_api/out.py); several separated by commas
  inplace   the in-place method generated from impl (`x.NAME_(...)`: run impl, write the result into x), or -
  hot       hot: on the C++ engine a hand-written fast path stands in front of impl for the common call
            (Note [Fast paths]); - otherwise
  uses      the core ops it is built from (`prim` = the primitive of ops.def of the same name), and `numpy` when
            a call of it crosses the numpy bridge (Note [The numpy bridge] in _api/bridge.py: host numerics,
            index arithmetic, checks that read values, conversions); tests/test_numpy_bridge.py keeps `numpy`
            true both ways by calling every row
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
tensor            ops.creation.tensor                 fn              -            -   copy_from_numpy,numpy
as_tensor         ops.creation.as_tensor              fn              -            -   from_numpy
from_numpy        ops.creation.from_numpy             fn              -            -   from_numpy,numpy
zeros             ops.creation.zeros                  fn,out          -            -   full
ones              ops.creation.ones                   fn,out          -            -   full
empty             ops.creation.empty                  fn,out          -            -   empty
full              ops.creation.full                   fn,out          -            -   full
zeros_like        ops.creation.zeros_like             fn              -            -   full
ones_like         ops.creation.ones_like              fn              -            -   full
empty_like        ops.creation.empty_like             fn              -            -   empty
full_like         ops.creation.full_like              fn              -            -   full
rand_like         ops.random.rand_like                fn              -            -   rand
randn_like        ops.random.randn_like               fn              -            -   randn
arange            ops.creation.arange                 fn,out          -            -   copy_from_numpy,numpy
linspace          ops.creation.linspace               fn,out          -            -   copy_from_numpy,numpy
eye               ops.creation.eye                    fn,out          -            -   copy_from_numpy,numpy
rand              ops.random.rand                     fn,out          -            -   rand
randn             ops.random.randn                    fn,out          -            -   randn
randint           ops.random.randint                  fn,out          -            -   randint
randperm          ops.random.randperm                 fn,out          -            -   randperm
normal            ops.random.normal                   fn,out          -            -   randn,mul,add
bernoulli         ops.random.bernoulli                fn,out,method   -            -   rand,compare,numpy
manual_seed       generator.manual_seed               fn              -            -   manual_seed
initial_seed      generator.initial_seed              fn              -            -   initial_seed
seed              generator.seed                      fn              -            -   manual_seed
logspace          ops.creation.logspace               fn,out          -            -   empty,numpy
range             ops.creation.range                  fn,out          -            -   empty,numpy
scalar_tensor     ops.creation.scalar_tensor          fn              -            -   full
asarray           ops.creation.asarray                fn              -            -   from_numpy,copy_from_numpy
frombuffer        ops.creation.frombuffer             fn              -            -   from_numpy,numpy
empty_strided     ops.creation.empty_strided          fn              -            -   full,from_numpy,numpy
fill              ops.creation.fill                   fn              -            -   full,expand
new_empty_strided ops.creation.new_empty_strided      method          -            -   full,from_numpy,numpy
hann_window       ops.creation.hann_window            fn              -            -   copy_from_numpy,numpy
hamming_window    ops.creation.hamming_window         fn              -            -   copy_from_numpy,numpy
blackman_window   ops.creation.blackman_window        fn              -            -   copy_from_numpy,numpy
bartlett_window   ops.creation.bartlett_window        fn              -            -   copy_from_numpy,numpy
kaiser_window     ops.creation.kaiser_window          fn              -            -   copy_from_numpy,numpy
# ----- generators and random sampling (_api/generator.py: Note [Generators as swapped core states]) ----------
Generator         generator.Generator                 fn              -            -   _get_rng_state,_set_rng_state
default_generator generator.default_generator         fn              -            -   _get_rng_state,_set_rng_state
get_rng_state     generator.get_rng_state             fn              -            -   _get_rng_state,numpy
set_rng_state     generator.set_rng_state             fn              -            -   _set_rng_state,numpy
randint_like      ops.random.randint_like             fn              -            -   randint
multinomial       ops.random.multinomial              fn,out,method   -            -   rand,numpy
poisson           ops.random.poisson                  fn              -            -   randint,numpy
binomial          ops.random.binomial                 fn              -            -   randint,numpy
random_           ops.random.random_                  method          -            -   randint
exponential_      ops.random.exponential_             method          -            -   rand,numpy
geometric_        ops.random.geometric_               method          -            -   rand,numpy
cauchy_           ops.random.cauchy_                  method          -            -   rand,numpy
log_normal_       ops.random.log_normal_              method          -            -   randn,numpy
is_tensor         ops.creation.is_tensor              fn              -            -   -
numel             ops.creation.numel                  fn              -            -   -
is_floating_point ops.creation.is_floating_point      fn              -            -   -
new_zeros         ops.creation.new_zeros              method          -            -   full
new_ones          ops.creation.new_ones               method          -            -   full
new_empty         ops.creation.new_empty              method          -            -   empty
new_full          ops.creation.new_full               method          -            -   full
new_tensor        ops.creation.new_tensor             method          -            -   copy_from_numpy,numpy
# ----- arithmetic (uses `numpy`: the call crosses the numpy bridge, Note [The numpy bridge] in bridge.py) -------
add               ops.pointwise.add                   fn,method,out   add_         hot prim,mul
sub               ops.pointwise.sub                   fn,method,out   sub_         hot prim,mul
subtract          ops.pointwise.sub                   fn,method,out   subtract_    -   sub,mul
rsub              ops.pointwise.rsub                  fn              -            -   sub,mul
mul               ops.pointwise.mul                   fn,method,out   mul_         hot prim
multiply          ops.pointwise.mul                   fn,method,out   multiply_    -   mul
div               ops.pointwise.div                   fn,method,out   div_         hot prim,numpy
divide            ops.pointwise.div                   fn,method,out   divide_      -   div,numpy
true_divide       ops.pointwise.true_divide           fn,method,out   true_divide_ -   div
floor_divide      ops.pointwise.floor_divide          fn,method,out   floor_divide_ -  numpy
remainder         ops.pointwise.remainder             fn,method,out   remainder_   -   numpy
fmod              ops.pointwise.fmod                  fn,method,out   fmod_        -   numpy
addcmul           ops.pointwise.addcmul               fn,method,out   addcmul_     -   mul,add
addcdiv           ops.pointwise.addcdiv               fn,method,out   addcdiv_     -   mul,div,add
lerp              ops.pointwise.lerp                  fn,method,out   lerp_        -   sub,mul,add,where
pow               ops.pointwise.pow                   fn,method,out   pow_         -   prim,pow_scalar
float_power       ops.pointwise.float_power           fn,method,out   -            -   to_dtype,pow,pow_scalar,numpy
float_power_      ops.pointwise.float_power_          method          -            -   to_dtype,pow,pow_scalar,numpy
neg               ops.pointwise.neg                   fn,method,out   neg_         hot prim
negative          ops.pointwise.neg                   fn,method,out   negative_    -   neg
positive          ops.pointwise.positive              fn,method       -            -   -
reciprocal        ops.pointwise.reciprocal            fn,method,out   reciprocal_  -   div
square            ops.pointwise.square                fn,method,out   square_      -   mul
maximum           ops.pointwise.maximum               fn,method,out   -            -   prim
minimum           ops.pointwise.minimum               fn,method,out   -            -   prim
fmax              ops.pointwise.fmax                  fn,method,out   -            -   compare,isnan,where
fmin              ops.pointwise.fmin                  fn,method,out   -            -   compare,isnan,where
where             ops.indexing.where                  fn,out          -            -   prim,numpy
where             ops.indexing.where_method           method          -            -   prim
clamp             ops.pointwise.clamp                 fn,method,out   clamp_       -   prim,maximum,minimum,where
clip              ops.pointwise.clamp                 fn,method,out   clip_        -   clamp
clamp_min         ops.pointwise.clamp_min             fn,method,out   clamp_min_   -   clamp
clamp_max         ops.pointwise.clamp_max             fn,method,out   clamp_max_   -   clamp
nan_to_num        ops.pointwise.nan_to_num            fn,method,out   nan_to_num_  -   where,isnan,compare
copysign          ops.pointwise.copysign              fn,method,out   copysign_    -   numpy
hypot             ops.pointwise.hypot                 fn,method,out   hypot_       -   numpy
atan2             ops.pointwise.atan2                 fn,method,out   atan2_       -   numpy
arctan2           ops.pointwise.atan2                 fn,method,out   arctan2_     -   numpy
logaddexp         ops.pointwise.logaddexp             fn,method,out   -            -   numpy
logaddexp2        ops.pointwise.logaddexp2            fn,method,out   -            -   numpy
xlogy             ops.pointwise.xlogy                 fn,method,out,special xlogy_ -   numpy
heaviside         ops.pointwise.heaviside             fn,method,out   heaviside_   -   numpy
gcd               ops.pointwise.gcd                   fn,method,out   gcd_         -   numpy
lcm               ops.pointwise.lcm                   fn,method,out   lcm_         -   numpy
ldexp             ops.pointwise.ldexp                 fn,method,out   ldexp_       -   pow,mul
frexp             ops.pointwise.frexp                 fn,method       -            -   numpy
nextafter         ops.pointwise.nextafter             fn,method,out   nextafter_   -   sub,add,numpy
# ----- unary ------------------------------------------------------------------------------------------------
exp               ops.pointwise.exp                   fn,method,out   exp_         hot prim
exp2              ops.pointwise.exp2                  fn,method,out,special exp2_  -   numpy
expm1             ops.pointwise.expm1                 fn,method,out,special expm1_ -   numpy
log               ops.pointwise.log                   fn,method,out   log_         hot prim
log2              ops.pointwise.log2                  fn,method,out   log2_        -   numpy
log10             ops.pointwise.log10                 fn,method,out   log10_       -   numpy
log1p             ops.pointwise.log1p                 fn,method,out,special log1p_ -   numpy
sqrt              ops.pointwise.sqrt                  fn,method,out   sqrt_        hot prim
rsqrt             ops.pointwise.rsqrt                 fn,method,out   rsqrt_       hot prim
abs               ops.pointwise.abs                   fn,method,out   abs_         hot prim
absolute          ops.pointwise.abs                   fn,method,out   absolute_    -   abs
sin               ops.pointwise.sin                   fn,method,out   sin_         hot prim
cos               ops.pointwise.cos                   fn,method,out   cos_         hot prim
tan               ops.pointwise.tan                   fn,method,out   tan_         -   numpy
asin              ops.pointwise.asin                  fn,method,out   asin_        -   numpy
arcsin            ops.pointwise.asin                  fn,method,out   arcsin_      -   numpy
acos              ops.pointwise.acos                  fn,method,out   acos_        -   numpy
arccos            ops.pointwise.acos                  fn,method,out   arccos_      -   numpy
atan              ops.pointwise.atan                  fn,method,out   atan_        -   numpy
arctan            ops.pointwise.atan                  fn,method,out   arctan_      -   numpy
sinh              ops.pointwise.sinh                  fn,method,out   sinh_        -   numpy
cosh              ops.pointwise.cosh                  fn,method,out   cosh_        -   numpy
tanh              ops.pointwise.tanh                  fn,method,F,out tanh_        hot prim
asinh             ops.pointwise.asinh                 fn,method,out   asinh_       -   numpy
arcsinh           ops.pointwise.asinh                 fn,method,out   arcsinh_     -   numpy
acosh             ops.pointwise.acosh                 fn,method,out   acosh_       -   numpy
arccosh           ops.pointwise.acosh                 fn,method,out   arccosh_     -   numpy
atanh             ops.pointwise.atanh                 fn,method,out   atanh_       -   numpy
arctanh           ops.pointwise.atanh                 fn,method,out   arctanh_     -   numpy
deg2rad           ops.pointwise.deg2rad               fn,method,out   deg2rad_     -   mul
rad2deg           ops.pointwise.rad2deg               fn,method,out   rad2deg_     -   mul
sigmoid           ops.pointwise.sigmoid               fn,method,F,out sigmoid_     hot prim
expit             ops.pointwise.sigmoid               special,out     -            -   sigmoid
logit             ops.pointwise.logit                 fn,method,out,special logit_ -   numpy
relu              ops.pointwise.relu                  fn,method       relu_        hot prim
sign              ops.pointwise.sign                  fn,method,out   sign_        -   prim,isnan,where
sgn               ops.pointwise.sign                  fn,method,out   sgn_         -   sign
signbit           ops.pointwise.signbit               fn,method,out   -            -   numpy
floor             ops.pointwise.floor                 fn,method,out   floor_       -   numpy
ceil              ops.pointwise.ceil                  fn,method,out   ceil_        -   numpy
round             ops.pointwise.round                 fn,method,out,special round_ -   numpy
trunc             ops.pointwise.trunc                 fn,method,out   trunc_       -   numpy
fix               ops.pointwise.trunc                 fn,method,out   fix_         -   numpy
frac              ops.pointwise.frac                  fn,method,out   frac_        -   sub,numpy
erf               ops.pointwise.erf                   fn,method,out,special erf_   hot prim
erfc              ops.pointwise.erfc                  fn,method,out,special erfc_  -   numpy
erfinv            ops.pointwise.erfinv                fn,method,out,special erfinv_ -  numpy
lgamma            ops.pointwise.lgamma                fn,method,out   lgamma_      -   numpy
gammaln           ops.pointwise.lgamma                special,out     -            -   numpy
digamma           ops.pointwise.digamma               fn,method,out,special digamma_ - numpy
psi               ops.pointwise.digamma               special,out     -            -   numpy
polygamma         ops.pointwise.polygamma             fn,out,special  -            -   numpy
polygamma         ops.pointwise.polygamma_method      method          polygamma_   -   numpy
mvlgamma          ops.pointwise.mvlgamma              fn,method,out   mvlgamma_    -   numpy,add,sum
multigammaln      ops.pointwise.mvlgamma              special,out     -            -   numpy,add,sum
sinc              ops.pointwise.sinc                  fn,method,out,special sinc_  -   numpy
i0                ops.pointwise.i0                    fn,method,out,special i0_    -   numpy
# ----- comparisons and tests --------------------------------------------------------------------------------
eq                ops.pointwise.eq                    fn,method,out   eq_          -   compare
ne                ops.pointwise.ne                    fn,method,out   ne_          -   compare
lt                ops.pointwise.lt                    fn,method,out   lt_          -   compare
le                ops.pointwise.le                    fn,method,out   le_          -   compare
gt                ops.pointwise.gt                    fn,method,out   gt_          -   compare
ge                ops.pointwise.ge                    fn,method,out   ge_          -   compare
isnan             ops.pointwise.isnan                 fn,method,out   -            -   isnan
isfinite          ops.pointwise.isfinite              fn,method,out   -            -   isfinite
isinf             ops.pointwise.isinf                 fn,method       -            -   compare,logical_or
isposinf          ops.pointwise.isposinf              fn,method,out   -            -   compare
isneginf          ops.pointwise.isneginf              fn,method,out   -            -   compare
isreal            ops.pointwise.isreal                fn,method       -            -   full
isclose           ops.pointwise.isclose               fn,method       -            -   numpy
allclose          ops.pointwise.allclose              fn,method       -            -   numpy
equal             ops.pointwise.equal                 fn,method       -            -   numpy
greater           ops.pointwise.gt                    fn,method,out   greater_     -   compare
greater_equal     ops.pointwise.ge                    fn,method,out   greater_equal_ - compare
less              ops.pointwise.lt                    fn,method,out   less_        -   compare
less_equal        ops.pointwise.le                    fn,method,out   less_equal_  -   compare
not_equal         ops.pointwise.ne                    fn,method,out   not_equal_   -   compare
# ----- logic and bits ---------------------------------------------------------------------------------------
logical_and       ops.pointwise.logical_and           fn,method,out   logical_and_ -   logical_and
logical_or        ops.pointwise.logical_or            fn,method,out   logical_or_  -   logical_or
logical_xor       ops.pointwise.logical_xor           fn,method,out   logical_xor_ -   logical_xor
logical_not       ops.pointwise.logical_not           fn,method,out   logical_not_ -   logical_not
bitwise_and       ops.pointwise.bitwise_and           fn,method,out   bitwise_and_ -   numpy
bitwise_or        ops.pointwise.bitwise_or            fn,method,out   bitwise_or_  -   numpy
bitwise_xor       ops.pointwise.bitwise_xor           fn,method,out   bitwise_xor_ -   numpy
bitwise_not       ops.pointwise.bitwise_not           fn,method,out   bitwise_not_ -   numpy
bitwise_left_shift ops.pointwise.bitwise_left_shift   fn,method,out   bitwise_left_shift_ - numpy
bitwise_right_shift ops.pointwise.bitwise_right_shift fn,method,out   bitwise_right_shift_ - numpy
# ----- torch.special: the names it alone has (the shared ones carry `special` in their rows above) ----------
erfcx             ops.special.erfcx                   special,out     -            -   numpy
log_ndtr          ops.special.log_ndtr                special,out     -            -   numpy
ndtr              ops.special.ndtr                    special,out     -            -   numpy,mul
ndtri             ops.special.ndtri                   special,out     -            -   numpy
xlog1py           ops.special.xlog1py                 special,out     -            -   numpy
entr              ops.special.entr                    special,out     -            -   numpy
i0e               ops.special.i0e                     special,out     -            -   numpy
i1                ops.special.i1                      special,out     -            -   numpy
i1e               ops.special.i1e                     special,out     -            -   numpy
zeta              ops.special.zeta                    special,out     -            -   numpy
softmax           ops.special.softmax                 special         -            -   softmax
log_softmax       ops.special.log_softmax             special         -            -   log_softmax
logsumexp         ops.special.logsumexp               special,out     -            -   logsumexp
# ----- torch.masked: the reductions and normalisations with mask= (dyngrad.masked.NAME) ----------------------
sum               ops.masked.sum                      masked          -            -   where,sum
prod              ops.masked.prod                     masked          -            -   where,to_dtype,prod
cumsum            ops.masked.cumsum                   masked          -            -   where,cumsum,numpy
cumprod           ops.masked.cumprod                  masked          -            -   where,cumprod,numpy
amax              ops.masked.amax                     masked          -            -   where,amax
amin              ops.masked.amin                     masked          -            -   where,amin
argmax            ops.masked.argmax                   masked          -            -   where,argmax
argmin            ops.masked.argmin                   masked          -            -   where,argmin
mean              ops.masked.mean                     masked          -            -   where,sum,div
median            ops.masked.median                   masked          -            -   where,nanmedian,numpy
logsumexp         ops.masked.logsumexp                masked          -            -   where,logsumexp
logaddexp         ops.masked.logaddexp                masked          -            -   where,logaddexp,numpy
norm              ops.masked.norm                     masked          -            -   where,vector_norm
var               ops.masked.var                      masked          -            -   where,sum,sub,mul,div,clamp
std               ops.masked.std                      masked          -            -   where,sum,sub,mul,div,clamp,sqrt
softmax           ops.masked.softmax                  masked          -            -   where,softmax
log_softmax       ops.masked.log_softmax              masked          -            -   where,log_softmax
softmin           ops.masked.softmin                  masked          -            -   where,softmin
normalize         ops.masked.normalize                masked          -            -   where,vector_norm,clamp,div
# ----- reductions -------------------------------------------------------------------------------------------
sum               ops.reduction.sum                   fn,method,out   -            hot prim
nansum            ops.reduction.nansum                fn,method,out   -            -   isnan,where,sum
mean              ops.reduction.mean                  fn,method,out   -            hot prim
nanmean           ops.reduction.nanmean               fn,method,out   -            -   isnan,where,sum,div
var               ops.reduction.var                   fn,method,out   -            -   var
std               ops.reduction.std                   fn,method,out   -            -   std
var_mean          ops.reduction.var_mean              fn              -            -   var,mean
std_mean          ops.reduction.std_mean              fn              -            -   std,mean
prod              ops.reduction.prod                  fn,method,out   -            -   slice,mul,cat
max               ops.reduction.max                   fn,method,out   -            -   amax,argmax,gather,maximum,numpy
min               ops.reduction.min                   fn,method,out   -            -   amin,argmin,gather,minimum,numpy
amax              ops.reduction.amax                  fn,method,out   -            -   prim
amin              ops.reduction.amin                  fn,method,out   -            -   prim
aminmax           ops.reduction.aminmax               fn,method,out   -            -   amin,amax
argmax            ops.reduction.argmax                fn,method,out   -            -   argmax
argmin            ops.reduction.argmin                fn,method,out   -            -   argmin
logsumexp         ops.reduction.logsumexp             fn,method,out   -            -   prim
any               ops.reduction.any                   fn,method,out   -            -   compare,sum
all               ops.reduction.all                   fn,method,out   -            -   compare,sum
count_nonzero     ops.reduction.count_nonzero         fn,method       -            -   compare,sum
norm              ops.reduction.norm                  fn              -            -   abs,sum,sqrt,pow_scalar,amax,amin,where
norm              ops.reduction.norm_method           method          -            -   abs,sum,sqrt,pow_scalar,amax,amin,where
sum_to_size       ops.reduction.sum_to_size           method          -            -   sum,reshape
# ----- scans ------------------------------------------------------------------------------------------------
cumsum            ops.scan.cumsum                     fn,method,out   cumsum_      -   index_select,numpy
cumprod           ops.scan.cumprod                    fn,method,out   cumprod_     -   index_select,where,div,mul,numpy
cummax            ops.scan.cummax                     fn,method,out   -            -   gather,numpy
cummin            ops.scan.cummin                     fn,method,out   -            -   gather,numpy
logcumsumexp      ops.scan.logcumsumexp               fn,method,out   -            -   index_select,where,log,exp,numpy
# ----- sorting and order statistics -------------------------------------------------------------------------
sort              ops.sorting.sort                    fn,method,out   -            -   gather,numpy
argsort           ops.sorting.argsort                 fn,method,out   -            -   numpy
msort             ops.sorting.msort                   fn,method,out   -            -   gather,numpy
topk              ops.sorting.topk                    fn,method,out   -            -   gather,numpy
kthvalue          ops.sorting.kthvalue                fn,method,out   -            -   gather,numpy
median            ops.sorting.median                  fn,method,out   -            -   gather,mul,numpy
nanmedian         ops.sorting.nanmedian               fn,method,out   -            -   gather,mul,numpy
mode              ops.sorting.mode                    fn,method,out   -            -   gather,numpy
quantile          ops.sorting.quantile                fn,method,out   -            -   gather,sub,mul,where,numpy
nanquantile       ops.sorting.nanquantile             fn,method,out   -            -   gather,sub,mul,where,numpy
unique            ops.sorting.unique                  fn,method       -            -   numpy
unique_consecutive ops.sorting.unique_consecutive     fn,method       -            -   numpy
isin              ops.sorting.isin                    fn              -            -   numpy
# ----- linear algebra: products ------------------------------------------------------------------------------
matmul            ops.products.matmul                 fn,method,out   -            hot prim
mm                ops.products.mm                     fn,method,out   -            -   matmul
bmm               ops.products.bmm                    fn,method,out   -            -   matmul
mv                ops.products.mv                     fn,method,out   -            -   matmul
dot               ops.products.dot                    fn,method,out   -            -   matmul
vdot              ops.products.vdot                   fn,method,out   -            -   matmul
inner             ops.products.inner                  fn,method,out   -            -   permute,reshape,matmul,sum
outer             ops.products.outer                  fn,method,out   -            -   unsqueeze,mul
ger               ops.products.outer                  fn,method,out   -            -   unsqueeze,mul
addmm             ops.products.addmm                  fn,method,out   addmm_       -   matmul,mul,add
addmv             ops.products.addmv                  fn,method,out   addmv_       -   matmul,mul,add
addbmm            ops.products.addbmm                 fn,method,out   addbmm_      -   permute,reshape,matmul,mul,add
baddbmm           ops.products.baddbmm                fn,method,out   baddbmm_     -   matmul,mul,add
addr              ops.products.addr                   fn,method,out   addr_        -   unsqueeze,mul,add
einsum            ops.products.einsum                 fn              -            -   permute,reshape,expand,matmul,mul,sum,slice
tensordot         ops.products.tensordot              fn,out          -            -   permute,reshape,matmul,sum
kron              ops.products.kron                   fn,method,out   -            -   reshape,mul
cross             ops.products.cross                  fn,method,out   -            -   expand,index_select,mul,sub,numpy
trace             ops.products.trace                  fn,method       -            -   reshape,slice,sum
chain_matmul      ops.products.chain_matmul           fn,out          -            -   matmul
# ----- linear algebra: factorisations (numpy.linalg forwards, custom Functions) ------------------------------
inverse           ops.linalg.inverse                  fn,method,out   -            -   matmul,numpy
det               ops.linalg.det                      fn,method       -            -   matmul,mul,numpy
logdet            ops.linalg.logdet                   fn,method       -            -   matmul,where,numpy
slogdet           ops.linalg.slogdet                  fn,method       -            -   matmul,mul,numpy
pinverse          ops.linalg.pinverse                 fn,method       -            -   matmul,numpy
cholesky          ops.linalg.cholesky                 fn,method,out   -            -   matmul,mul,numpy
qr                ops.linalg.qr                       fn,method,out   -            -   matmul,mul,cat,numpy
svd               ops.linalg.svd                      fn,method,out   -            -   matmul,mul,div,numpy
matrix_power      ops.linalg.matrix_power             fn,method,out   -            -   matmul
# ----- torch.linalg (kind linalg: dyngrad.linalg.NAME) ------------------------------------------------------
LinAlgError       ops.linalg.LinAlgError              linalg          -            -   -
matmul            ops.products.matmul                 linalg,out      -            -   matmul
diagonal          ops.products.linalg_diagonal        linalg          -            -   permute,reshape,slice
multi_dot         ops.products.multi_dot              linalg,out      -            -   matmul
cross             ops.products.linalg_cross           linalg,out      -            -   expand,index_select,mul,sub,numpy
vecdot            ops.products.vecdot                 linalg,out      -            -   mul,sum
inv               ops.linalg.inv                      linalg,out      -            -   matmul,numpy
inv_ex            ops.linalg.inv_ex                   linalg,out      -            -   matmul,numpy
det               ops.linalg.linalg_det               linalg,out      -            -   matmul,mul,numpy
slogdet           ops.linalg.linalg_slogdet           linalg,out      -            -   matmul,mul,numpy
solve             ops.linalg.solve                    linalg,out      -            -   expand,matmul,numpy
solve_triangular  ops.linalg.solve_triangular         linalg,out      -            -   expand,matmul,mul,numpy
cholesky          ops.linalg.linalg_cholesky          linalg,out      -            -   matmul,mul,numpy
cholesky_ex       ops.linalg.cholesky_ex              linalg,out      -            -   matmul,mul,numpy
qr                ops.linalg.linalg_qr                linalg,out      -            -   matmul,mul,cat,numpy
eigh              ops.linalg.eigh                     linalg,out      -            -   matmul,mul,div,numpy
eigvalsh          ops.linalg.eigvalsh                 linalg,out      -            -   matmul,mul,numpy
svd               ops.linalg.linalg_svd               linalg,out      -            -   matmul,mul,div,numpy
svdvals           ops.linalg.svdvals                  linalg,out      -            -   matmul,mul,numpy
pinv              ops.linalg.pinv                     linalg,out      -            -   matmul,numpy
lstsq             ops.linalg.lstsq                    linalg          -            -   matmul,mul,sum,numpy
matrix_power      ops.linalg.linalg_matrix_power      linalg,out      -            -   matmul
matrix_rank       ops.linalg.matrix_rank              linalg,out      -            -   numpy
vector_norm       ops.linalg.vector_norm              linalg,out      -            -   abs,mul,sum,sqrt,pow_scalar,amax,where
matrix_norm       ops.linalg.matrix_norm              linalg,out      -            -   abs,sum,amax,vector_norm,svdvals
norm              ops.linalg.linalg_norm              linalg,out      -            -   vector_norm,matrix_norm
cond              ops.linalg.cond                     linalg,out      -            -   svdvals,matrix_norm,div,numpy
# ----- torch.linalg: eig, the LU and LDL families, matrix_exp, ... (and torch's top-level names for them) -----
eig               ops.linalg.eig                      linalg,out      -            -   matmul,mul,div,numpy
eigvals           ops.linalg.eigvals                  linalg,out      -            -   matmul,mul,div,numpy
lu                ops.linalg.lu                       linalg,out      -            -   matmul,mul,cat,numpy
lu_factor         ops.linalg.lu_factor                linalg,out      -            -   matmul,mul,cat,numpy
lu_factor_ex      ops.linalg.lu_factor_ex             linalg,out      -            -   matmul,mul,cat,numpy
lu_solve          ops.linalg.lu_solve                 linalg,out      -            -   matmul,mul,expand,numpy
solve_ex          ops.linalg.solve_ex                 linalg,out      -            -   matmul,mul,expand,numpy
matrix_exp        ops.linalg.matrix_exp               linalg          -            -   cat,slice,numpy
householder_product ops.linalg.householder_product        linalg,out      -            -   matmul,mul,sub,select,numpy
ldl_factor        ops.linalg.ldl_factor               linalg,out      -            -   numpy
ldl_factor_ex     ops.linalg.ldl_factor_ex            linalg,out      -            -   numpy
ldl_solve         ops.linalg.ldl_solve                linalg,out      -            -   numpy
tensorinv         ops.linalg.tensorinv                linalg,out      -            -   reshape,matmul,numpy
tensorsolve       ops.linalg.tensorsolve              linalg,out      -            -   permute,reshape,matmul,numpy
vander            ops.linalg.vander                   linalg          -            -   expand,cumprod,cat,numpy
lu                ops.linalg.torch_lu                 fn,method       -            -   matmul,mul,cat,numpy
lu_unpack         ops.linalg.lu_unpack                fn,out          -            -   mul,add,numpy
lu_solve          ops.linalg.torch_lu_solve           fn,method,out   -            -   matmul,mul,expand,numpy
matrix_exp        ops.linalg.matrix_exp               fn,method       -            -   cat,slice,numpy
vander            ops.linalg.torch_vander             fn              -            -   expand,cumprod,cat,index_select,numpy
orgqr             ops.linalg.orgqr                    fn,method,out   -            -   matmul,mul,sub,select,numpy
ormqr             ops.linalg.ormqr                    fn,method,out   -            -   matmul,mul,sub,select,numpy
geqrf             ops.linalg.geqrf                    fn,method,out   -            -   numpy
cholesky_solve    ops.linalg.cholesky_solve           fn,method,out   -            -   matmul,expand,numpy
cholesky_inverse  ops.linalg.cholesky_inverse         fn,method,out   -            -   matmul,expand,numpy
triangular_solve  ops.linalg.triangular_solve         fn,method,out   -            -   matmul,expand,mul,numpy
igamma            ops.special.gammainc                fn,method,out   igamma_      -   numpy,exp,log,lgamma
igammac           ops.special.gammaincc               fn,method,out   igammac_     -   numpy,exp,log,lgamma
# ----- torch.special: Bessel, Airy, incomplete gamma, orthogonal polynomials (kernels in host/special.py) -----
bessel_j0         ops.special.bessel_j0               special,out     -            -   numpy
bessel_j1         ops.special.bessel_j1               special,out     -            -   numpy
bessel_y0         ops.special.bessel_y0               special,out     -            -   numpy
bessel_y1         ops.special.bessel_y1               special,out     -            -   numpy
modified_bessel_i0 ops.special.modified_bessel_i0      special,out - - numpy
modified_bessel_i1 ops.special.modified_bessel_i1      special,out - - numpy
modified_bessel_k0 ops.special.modified_bessel_k0      special,out - - numpy
modified_bessel_k1 ops.special.modified_bessel_k1      special,out - - numpy
scaled_modified_bessel_k0 ops.special.scaled_modified_bessel_k0      special,out - - numpy
scaled_modified_bessel_k1 ops.special.scaled_modified_bessel_k1      special,out - - numpy
spherical_bessel_j0 ops.special.spherical_bessel_j0      special,out - - numpy
airy_ai           ops.special.airy_ai                 special,out     -            -   numpy
gammainc          ops.special.gammainc                special,out     -            -   numpy,exp,log,lgamma
gammaincc         ops.special.gammaincc               special,out     -            -   numpy,exp,log,lgamma
chebyshev_polynomial_t ops.special.chebyshev_polynomial_t      special,out - - numpy
chebyshev_polynomial_u ops.special.chebyshev_polynomial_u      special,out - - numpy
chebyshev_polynomial_v ops.special.chebyshev_polynomial_v      special,out - - numpy
chebyshev_polynomial_w ops.special.chebyshev_polynomial_w      special,out - - numpy
shifted_chebyshev_polynomial_t ops.special.shifted_chebyshev_polynomial_t      special,out - - numpy
shifted_chebyshev_polynomial_u ops.special.shifted_chebyshev_polynomial_u      special,out - - numpy
shifted_chebyshev_polynomial_v ops.special.shifted_chebyshev_polynomial_v      special,out - - numpy
shifted_chebyshev_polynomial_w ops.special.shifted_chebyshev_polynomial_w      special,out - - numpy
hermite_polynomial_h ops.special.hermite_polynomial_h      special,out - - numpy
hermite_polynomial_he ops.special.hermite_polynomial_he      special,out - - numpy
laguerre_polynomial_l ops.special.laguerre_polynomial_l      special,out - - numpy
legendre_polynomial_p ops.special.legendre_polynomial_p      special,out - - numpy
# ----- shape ------------------------------------------------------------------------------------------------
reshape           ops.shape.reshape                   fn              -            -   prim
reshape           ops.shape.reshape_method            method          -            -   prim
view              ops.shape.view                      method          -            -   view
view_as           ops.shape.view_as                   method          -            -   view
reshape_as        ops.shape.reshape_as                method          -            -   reshape
flatten           ops.shape.flatten                   fn,method       -            -   reshape
transpose         ops.shape.transpose                 fn,method       -            -   permute
swapaxes          ops.shape.swapaxes                  fn,method       -            -   permute
swapdims          ops.shape.swapdims                  fn,method       -            -   permute
movedim           ops.shape.movedim                   fn,method       -            -   permute
moveaxis          ops.shape.movedim                   fn,method       -            -   permute
t                 ops.shape.t                         fn,method       -            -   permute
permute           ops.shape.permute                   fn              -            -   prim
permute           ops.shape.permute_method            method          -            -   prim
squeeze           ops.shape.squeeze                   fn,method       -            -   reshape
unsqueeze         ops.shape.unsqueeze                 fn,method       -            -   reshape
expand            ops.shape.expand                    method          -            -   prim
expand_as         ops.shape.expand_as                 method          -            -   expand
broadcast_to      ops.shape.broadcast_to              fn              -            -   expand
broadcast_to      ops.shape.broadcast_to_method       method          -            -   expand
broadcast_tensors ops.shape.broadcast_tensors         fn              -            -   expand
broadcast_shapes  ops.shape.broadcast_shapes          fn              -            -   -
cat               ops.shape.cat                       fn,out          -            -   prim
concat            ops.shape.cat                       fn,out          -            -   cat
stack             ops.shape.stack                     fn,out          -            -   cat,reshape
split             ops.shape.split                     fn              -            -   slice
split             ops.shape.split_method              method          -            -   slice
chunk             ops.shape.chunk                     fn,method       -            -   slice
unbind            ops.shape.unbind                    fn,method       -            -   slice
narrow            ops.shape.narrow                    fn,method       -            -   slice
select            ops.shape.select                    fn,method       -            -   slice
unflatten         ops.shape.unflatten                 fn,method       -            -   view
ravel             ops.shape.ravel                     fn,method       -            -   reshape
tensor_split      ops.shape.tensor_split              fn,method       -            -   slice
hsplit            ops.shape.hsplit                    fn,method       -            -   slice
vsplit            ops.shape.vsplit                    fn,method       -            -   slice
dsplit            ops.shape.dsplit                    fn,method       -            -   slice
atleast_1d        ops.shape.atleast_1d                fn              -            -   reshape
atleast_2d        ops.shape.atleast_2d                fn              -            -   reshape
atleast_3d        ops.shape.atleast_3d                fn              -            -   reshape
hstack            ops.shape.hstack                    fn,out          -            -   cat
vstack            ops.shape.vstack                    fn,out          -            -   cat
row_stack         ops.shape.vstack                    fn,out          -            -   cat
dstack            ops.shape.dstack                    fn,out          -            -   cat
column_stack      ops.shape.column_stack              fn,out          -            -   cat
meshgrid          ops.shape.meshgrid                  fn              -            -   expand
cartesian_prod    ops.shape.cartesian_prod            fn              -            -   expand,stack
combinations      ops.shape.combinations              fn              -            -   take,numpy
block_diag        ops.shape.block_diag                fn              -            -   cat
flip              ops.shape.flip                      fn              -            -   take,numpy
flip              ops.shape.flip_method               method          -            -   take,numpy
fliplr            ops.shape.fliplr                    fn,method       -            -   take,numpy
flipud            ops.shape.flipud                    fn,method       -            -   take,numpy
roll              ops.shape.roll                      fn,method       -            -   take,numpy
rot90             ops.shape.rot90                     fn,method       -            -   take,numpy
repeat            ops.shape.repeat                    method          -            -   take,numpy
tile              ops.shape.tile                      fn              -            -   take,numpy
tile              ops.shape.tile_method               method          -            -   take,numpy
repeat_interleave ops.shape.repeat_interleave         fn,method       -            -   index_select,numpy
unfold            ops.shape.unfold                    method          -            -   slice,view,take,numpy
as_strided        ops.shape.as_strided                fn,method       -            -   take,numpy
tril              ops.shape.tril                      fn,method,out   tril_        -   where,numpy
triu              ops.shape.triu                      fn,method,out   triu_        -   where,numpy
tril_indices      ops.shape.tril_indices              fn              -            -   copy_from_numpy,numpy
triu_indices      ops.shape.triu_indices              fn              -            -   copy_from_numpy,numpy
diagonal          ops.shape.diagonal                  fn,method       -            -   view,slice,take
diag              ops.shape.diag                      fn,method,out   -            -   put,take,numpy
diag_embed        ops.shape.diag_embed                fn,method       -            -   put,numpy
diagflat          ops.shape.diagflat                  fn,method       -            -   put,numpy
select_scatter    ops.shape.select_scatter            fn,method       -            -   put,numpy
slice_scatter     ops.shape.slice_scatter             fn,method       -            -   put,numpy
diagonal_scatter  ops.shape.diagonal_scatter          fn,method       -            -   put,numpy
unsqueeze_        ops.shape.unsqueeze_                method          -            -   reshape,assign_inplace
squeeze_          ops.shape.squeeze_                  method          -            -   reshape,assign_inplace
t_                ops.shape.t_                        method          -            -   permute,assign_inplace
transpose_        ops.shape.transpose_                method          -            -   permute,assign_inplace
swapdims_         ops.shape.swapdims_                 method          -            -   permute,assign_inplace
swapaxes_         ops.shape.swapaxes_                 method          -            -   permute,assign_inplace
as_strided_       ops.shape.as_strided_               method          -            -   take,assign_inplace,numpy
clone             ops.shape.clone                     fn,method       -            -   prim
contiguous        ops.shape.contiguous                method          -            -   clone
T                 ops.shape.T                         prop            -            -   permute
mT                ops.shape.mT                        prop            -            -   permute
concatenate       ops.shape.concatenate               fn,out          -            -   cat
split_with_sizes  ops.shape.split_with_sizes          fn,method       -            -   split
unsafe_chunk      ops.shape.unsafe_chunk              fn,method       -            -   chunk
unsafe_split      ops.shape.unsafe_split              fn              -            -   split
unsafe_split      ops.shape.unsafe_split_method       method          -            -   split
fill_diagonal_    ops.shape.fill_diagonal_            method          -            -   put,assign_inplace,numpy
unsafe_split_with_sizes ops.shape.unsafe_split_with_sizes fn,method       -            -   split
as_strided_scatter ops.shape.as_strided_scatter       fn,method       -            -   put,numpy
as_strided_copy   ops.shape.COPY_FORMS                fn,out          -            -   take,clone,numpy
diagonal_copy     ops.shape.COPY_FORMS                fn,out          -            -   view,clone
expand_copy       ops.shape.COPY_FORMS                fn,out          -            -   expand,clone
permute_copy      ops.shape.COPY_FORMS                fn,out          -            -   permute,clone
select_copy       ops.shape.COPY_FORMS                fn,out          -            -   select,clone
slice_copy        ops.shape.COPY_FORMS                fn,out          -            -   slice,clone
squeeze_copy      ops.shape.COPY_FORMS                fn,out          -            -   reshape,clone
t_copy            ops.shape.COPY_FORMS                fn,out          -            -   permute,clone
transpose_copy    ops.shape.COPY_FORMS                fn,out          -            -   permute,clone
unbind_copy       ops.shape.COPY_FORMS                fn              -            -   select,clone
unfold_copy       ops.shape.COPY_FORMS                fn,out          -            -   unfold,clone,numpy
unsqueeze_copy    ops.shape.COPY_FORMS                fn,out          -            -   reshape,clone
view_copy         ops.shape.COPY_FORMS                fn,out          -            -   view,clone
split_copy        ops.shape.COPY_FORMS                fn              -            -   split,clone
split_with_sizes_copy ops.shape.COPY_FORMS            fn              -            -   split,clone
detach_copy       ops.shape.COPY_FORMS                fn,out          -            -   clone
alias_copy        ops.shape.COPY_FORMS                fn,out          -            -   clone
narrow_copy       ops.shape.COPY_FORMS                fn,out          -            -   slice,clone
narrow_copy       ops.shape.narrow_copy_method        method          -            -   slice,clone
# ----- indexing ---------------------------------------------------------------------------------------------
__getitem__       ops.indexing.getitem                op              -            hot slice,take
__setitem__       ops.indexing.setitem                op              -            -   put,copy_
gather            ops.indexing.gather                 fn,method,out   -            -   prim
index_select      ops.indexing.index_select           fn,method,out   -            -   prim
take_along_dim    ops.indexing.take_along_dim         fn,method,out   -            -   gather,take,numpy
scatter           ops.indexing.scatter                fn,method,out   scatter_     -   put,take,numpy
scatter_add       ops.indexing.scatter_add            fn,method,out   scatter_add_ -   add,prim,numpy
scatter_reduce    ops.indexing.scatter_reduce         fn,method,out   scatter_reduce_ -   take,cat,sum,amax,put,numpy
index_put         ops.indexing.index_put              fn,method       index_put_   -   put,put_add,numpy
index_fill        ops.indexing.index_fill             fn,method       index_fill_  -   put,numpy
index_copy        ops.indexing.index_copy             fn,method,out   index_copy_  -   put,numpy
index_add         ops.indexing.index_add              fn,method,out   index_add_   -   index_add,add,numpy
masked_select     ops.indexing.masked_select          fn,method,out   -            -   take,numpy
masked_scatter    ops.indexing.masked_scatter         fn,method       masked_scatter_ -   put,take,numpy
nonzero           ops.indexing.nonzero                fn,method,out   -            -   numpy
argwhere          ops.indexing.argwhere               fn,method       -            -   numpy
searchsorted      ops.indexing.searchsorted           fn,out          -            -   numpy
bucketize         ops.indexing.bucketize              fn,out          -            -   numpy
take              ops.indexing.take                   fn,method,out   -            -   prim
masked_fill       ops.indexing.masked_fill            fn,method       masked_fill_ -   masked_fill,expand
unravel_index     ops.indexing.unravel_index          fn              -            -   numpy
nonzero_static    ops.indexing.nonzero_static         fn,method       -            -   numpy
index_reduce      ops.indexing.index_reduce           fn,method,out   index_reduce_ -  scatter_reduce,numpy
put               ops.indexing.put                    fn,method       put_         -   put,put_add,numpy
# ----- neural-net layers (also nn.functional) ---------------------------------------------------------------
linear            ops.linear.linear                   fn,F            -            hot matmul,add
bilinear          ops.linear.bilinear                 fn,F            -            -   matmul,mul,sum
embedding         ops.embedding.embedding             fn,F            -            -   index_select,numpy
one_hot           ops.embedding.one_hot               fn,F            -            -   numpy
# ----- convolutions (also nn.functional; _api/ops/conv.py) ---------------------------------------------------------
conv1d            ops.conv.conv1d                     fn,F            -            -   conv2d,unsqueeze,squeeze
conv2d            ops.conv.conv2d                     fn,F            -            -   conv2d
conv_transpose1d  ops.conv.conv_transpose1d           fn,F            -            -   matmul,fold,add
conv_transpose2d  ops.conv.conv_transpose2d           fn,F            -            -   matmul,fold,add
unfold            ops.conv.unfold                     F               -            -   unfold
fold              ops.conv.fold                       F               -            -   fold
# ----- pooling, padding, resampling (also nn.functional) ----------------------------------------------------
max_pool1d        ops.pooling.max_pool1d              fn,F            -            -   max_pool2d,index_select,gather
max_pool2d        ops.pooling.max_pool2d              fn,F            -            -   max_pool2d,index_select,gather
max_pool1d_with_indices ops.pooling.max_pool1d_with_indices fn,F          -            -   index_select,gather,numpy
max_pool2d_with_indices ops.pooling.max_pool2d_with_indices F             -            -   index_select,gather,numpy
avg_pool1d        ops.pooling.avg_pool1d              fn,F            -            -   avg_pool2d,index_select,sum
avg_pool2d        ops.pooling.avg_pool2d              fn,F            -            -   avg_pool2d,index_select,sum
adaptive_avg_pool1d ops.pooling.adaptive_avg_pool1d   fn,F            -            -   avg_pool2d,index_select,sum
adaptive_avg_pool2d ops.pooling.adaptive_avg_pool2d   F               -            -   avg_pool2d,index_select,sum,numpy
adaptive_max_pool1d ops.pooling.adaptive_max_pool1d   F               -            -   max_pool2d,index_select,gather
adaptive_max_pool2d ops.pooling.adaptive_max_pool2d   F               -            -   max_pool2d,index_select,gather,numpy
adaptive_max_pool1d_with_indices ops.pooling.adaptive_max_pool1d_with_indices F - -        index_select,gather,numpy
adaptive_max_pool2d_with_indices ops.pooling.adaptive_max_pool2d_with_indices F - -        index_select,gather,numpy
lp_pool1d         ops.pooling.lp_pool1d               F               -            -   avg_pool2d,pow_scalar
lp_pool2d         ops.pooling.lp_pool2d               F               -            -   avg_pool2d,pow_scalar
max_unpool1d      ops.pooling.max_unpool1d            F               -            -   put,numpy
max_unpool2d      ops.pooling.max_unpool2d            F               -            -   put,numpy
max_pool3d        ops.pooling.max_pool3d              fn,F            -            -   index_select,gather,numpy
max_pool3d_with_indices ops.pooling.max_pool3d_with_indices F             -            -   index_select,gather,numpy
avg_pool3d        ops.pooling.avg_pool3d              F               -            -   index_select,sum,numpy
adaptive_avg_pool3d ops.pooling.adaptive_avg_pool3d   F               -            -   index_select,sum,numpy
adaptive_max_pool3d ops.pooling.adaptive_max_pool3d   F               -            -   index_select,gather,numpy
adaptive_max_pool3d_with_indices ops.pooling.adaptive_max_pool3d_with_indices F - -        index_select,gather,numpy
lp_pool3d         ops.pooling.lp_pool3d               F               -            -   index_select,pow_scalar,numpy
max_unpool3d      ops.pooling.max_unpool3d            F               -            -   put,numpy
pad               ops.padding.pad                     F               -            -   slice,cat,index_select,numpy
constant_pad_nd   ops.padding.constant_pad_nd         fn              -            -   slice,cat,index_select,numpy
interpolate       ops.resampling.interpolate          F               -            -   index_select,mul,add,numpy
upsample          ops.resampling.upsample             F               -            -   index_select,mul,add,numpy
upsample_nearest  ops.resampling.upsample_nearest     F               -            -   index_select,numpy
upsample_bilinear ops.resampling.upsample_bilinear    F               -            -   index_select,mul,add,numpy
pixel_shuffle     ops.resampling.pixel_shuffle        fn,F            -            -   reshape,permute
pixel_unshuffle   ops.resampling.pixel_unshuffle      fn,F            -            -   reshape,permute
channel_shuffle   ops.resampling.channel_shuffle      fn,F            -            -   reshape,permute
embedding_bag     ops.embedding.embedding_bag         F               -            -   index_select,index_add,gather,numpy
# ----- 3-d convolutions, sampling grids, fractional pooling (also nn.functional) -----------------------------
conv3d            ops.conv.conv3d                     fn,F            -            -   index_select,conv2d,numpy
conv_transpose3d  ops.conv.conv_transpose3d           fn,F            -            -   matmul,fold,index_add,numpy
affine_grid       ops.sampling.affine_grid            F               -            -   matmul,numpy
grid_sample       ops.sampling.grid_sample            F               -            -   gather,mul,add,numpy
gumbel_softmax    ops.sampling.gumbel_softmax         F               -            -   rand,softmax,numpy
fractional_max_pool2d ops.pooling.fractional_max_pool2d   F               -            -   gather,numpy
fractional_max_pool3d ops.pooling.fractional_max_pool3d   F               -            -   gather,numpy
fractional_max_pool2d_with_indices ops.pooling.fractional_max_pool2d_with_indices F - -        gather,numpy
fractional_max_pool3d_with_indices ops.pooling.fractional_max_pool3d_with_indices F - -        gather,numpy
native_channel_shuffle ops.resampling.native_channel_shuffle fn,F           -            -   reshape,permute
conv_tbc          ops.conv.conv_tbc                   fn,F            -            -   conv2d,permute
# ----- activations (also nn.functional; the F.NAME_ rows are torch's in-place forms) ------------------------
softmax           ops.activation.softmax_fn           fn,method,out   -            -   prim
softmax           ops.activation.softmax              F               -            -   prim
log_softmax       ops.activation.log_softmax_fn       fn,method,out   -            -   prim
log_softmax       ops.activation.log_softmax          F               -            -   prim
softmin           ops.activation.softmin              F               -            -   softmax,neg
relu              ops.activation.relu                 F               -            -   relu
relu_             ops.activation.relu_                fn,F            -            -   relu,assign_inplace
relu6             ops.activation.relu6                F               -            -   where,clamp
leaky_relu        ops.activation.leaky_relu           fn,method,F     leaky_relu_  -   prim
leaky_relu_       ops.activation.leaky_relu_          F               -            -   leaky_relu,assign_inplace
hardtanh          ops.activation.hardtanh             F               -            -   where,clamp
hardtanh_         ops.activation.hardtanh_            F               -            -   where,clamp,assign_inplace
elu               ops.activation.elu                  F               -            -   where,exp
elu_              ops.activation.elu_                 F               -            -   where,exp,assign_inplace
selu              ops.activation.selu_fn              fn              -            -   where,exp
selu              ops.activation.selu                 F               -            -   where,exp
selu_             ops.activation.selu_                fn,F            -            -   where,exp,assign_inplace
celu              ops.activation.celu_fn              fn              -            -   where,exp
celu              ops.activation.celu                 F               -            -   where,exp
celu_             ops.activation.celu_                fn,F            -            -   where,exp,assign_inplace
rrelu             ops.activation.rrelu_fn             fn              -            -   where,rand,leaky_relu
rrelu             ops.activation.rrelu                F               -            -   where,rand,leaky_relu
rrelu_            ops.activation.rrelu_fn_inplace     fn              -            -   where,rand,assign_inplace
rrelu_            ops.activation.rrelu_               F               -            -   where,rand,assign_inplace
prelu             ops.activation.prelu                fn,method,F     -            -   where,mul
threshold         ops.activation.threshold_fn         fn              -            -   where
threshold         ops.activation.threshold            F               -            -   where
threshold_        ops.activation.threshold_           fn,F            -            -   where,assign_inplace
gelu              ops.activation.gelu                 fn,method,F     -            -   prim,tanh
softplus          ops.activation.softplus             fn,method,F     -            -   prim
silu              ops.activation.silu                 F               -            -   sigmoid,mul
mish              ops.activation.mish                 F               -            -   softplus,tanh,mul
logsigmoid        ops.activation.logsigmoid           F               -            -   softplus
hardsigmoid       ops.activation.hardsigmoid          F               -            -   where,clamp
hardswish         ops.activation.hardswish            F               -            -   where,mul
softsign          ops.activation.softsign             F               -            -   abs,div
tanhshrink        ops.activation.tanhshrink           F               -            -   tanh,sub
softshrink        ops.activation.softshrink           F               -            -   where
hardshrink        ops.activation.hardshrink           fn,method,F     -            -   where
glu               ops.activation.glu                  F               -            -   chunk,sigmoid,mul
# ----- dropout ------------------------------------------------------------------------------------------------
dropout           ops.dropout.dropout                 fn,F            -            -   bernoulli_mask,mul
dropout_          ops.dropout.dropout_                fn              -            -   bernoulli_mask,mul,assign_inplace
dropout1d         ops.dropout.dropout1d               F               -            -   bernoulli_mask,mul
dropout2d         ops.dropout.dropout2d               F               -            -   bernoulli_mask,mul
dropout3d         ops.dropout.dropout3d               F               -            -   bernoulli_mask,mul
alpha_dropout     ops.dropout.alpha_dropout_fn        fn              -            -   bernoulli_mask,mul,add
alpha_dropout     ops.dropout.alpha_dropout           F               -            -   bernoulli_mask,mul,add
alpha_dropout_    ops.dropout.alpha_dropout_          fn              -            -   bernoulli_mask,assign_inplace
feature_alpha_dropout ops.dropout.feature_alpha_dropout_fn fn             -            -   bernoulli_mask,mul,add
feature_alpha_dropout ops.dropout.feature_alpha_dropout   F               -            -   bernoulli_mask,mul,add
feature_alpha_dropout_ ops.dropout.feature_alpha_dropout_ fn              -            -   bernoulli_mask,assign_inplace
# ----- losses -------------------------------------------------------------------------------------------------
cross_entropy     ops.loss.cross_entropy              fn,F            -            hot prim,log_softmax,gather
nll_loss          ops.loss.nll_loss                   fn,F            -            -   gather,where,numpy
mse_loss          ops.loss.mse_loss                   fn,F            -            -   sub,mul,mean
l1_loss           ops.loss.l1_loss                    F               -            -   sub,abs,mean
smooth_l1_loss    ops.loss.smooth_l1_loss             F               -            -   sub,abs,where
huber_loss        ops.loss.huber_loss                 F               -            -   sub,abs,where
binary_cross_entropy ops.loss.binary_cross_entropy    F               -            -   _record_function,log,numpy
binary_cross_entropy_with_logits ops.loss.binary_cross_entropy_with_logits_fn fn -         -   softplus,mul
binary_cross_entropy_with_logits ops.loss.binary_cross_entropy_with_logits F  -            -   softplus,mul
kl_div            ops.loss.kl_div_fn                  fn              -            -   exp,log,where
kl_div            ops.loss.kl_div                     F               -            -   exp,log,where
poisson_nll_loss  ops.loss.poisson_nll_loss_fn        fn              -            -   exp,log,where
poisson_nll_loss  ops.loss.poisson_nll_loss           F               -            -   exp,log,where
gaussian_nll_loss ops.loss.gaussian_nll_loss          F               -            -   log,div,clamp
soft_margin_loss  ops.loss.soft_margin_loss           F               -            -   softplus
multilabel_soft_margin_loss ops.loss.multilabel_soft_margin_loss F        -            -   softplus,sum
multilabel_margin_loss ops.loss.multilabel_margin_loss    F               -            -   relu,mul,sum,numpy
multi_margin_loss ops.loss.multi_margin_loss          F               -            -   gather,relu,where,numpy
margin_ranking_loss ops.loss.margin_ranking_loss_fn   fn              -            -   clamp
margin_ranking_loss ops.loss.margin_ranking_loss      F               -            -   clamp
hinge_embedding_loss ops.loss.hinge_embedding_loss_fn fn              -            -   clamp,where
hinge_embedding_loss ops.loss.hinge_embedding_loss    F               -            -   clamp,where
cosine_embedding_loss ops.loss.cosine_embedding_loss_fn   fn              -            -   sum,sqrt,where
cosine_embedding_loss ops.loss.cosine_embedding_loss  F               -            -   sum,sqrt,where
triplet_margin_loss ops.loss.triplet_margin_loss_fn   fn              -            -   sum,sqrt,clamp
triplet_margin_loss ops.loss.triplet_margin_loss      F               -            -   sum,sqrt,clamp
triplet_margin_with_distance_loss ops.loss.triplet_margin_with_distance_loss F -          -   clamp,minimum
ctc_loss          ops.loss.ctc_loss_fn                fn              -            -   _record_function,numpy
ctc_loss          ops.loss.ctc_loss                   F               -            -   _record_function,numpy
# ----- normalisation ------------------------------------------------------------------------------------------
batch_norm        ops.normalization.batch_norm_fn     fn              -            -   mean,var,rsqrt,copy_
batch_norm        ops.normalization.batch_norm        F               -            -   mean,var,rsqrt,copy_
instance_norm     ops.normalization.instance_norm_fn  fn              -            -   mean,var,rsqrt,copy_
instance_norm     ops.normalization.instance_norm     F               -            -   mean,var,rsqrt,copy_
group_norm        ops.normalization.group_norm_fn     fn              -            -   mean,var,rsqrt
group_norm        ops.normalization.group_norm        F               -            -   mean,var,rsqrt
layer_norm        ops.normalization.layer_norm_fn     fn              -            -   mean,sub,mul,rsqrt
layer_norm        ops.normalization.layer_norm        F               -            -   mean,sub,mul,rsqrt
rms_norm          ops.normalization.rms_norm          fn,F            -            -   mean,mul,rsqrt
local_response_norm ops.normalization.local_response_norm F               -            -   cat,slice,pow_scalar,div
normalize         ops.normalization.normalize         F               -            -   sum,pow_scalar,div
renorm            ops.normalization.renorm            fn,method,out   renorm_      -   vector_norm,div,where,mul
# ----- distances and attention --------------------------------------------------------------------------------
cosine_similarity ops.distance.cosine_similarity      fn,F            -            -   sum,sqrt,div
pairwise_distance ops.distance.pairwise_distance      fn,F            -            -   sum,sqrt
pdist             ops.distance.pdist                  fn,F            -            -   index_select,sum,sqrt,numpy
scaled_dot_product_attention ops.attention.scaled_dot_product_attention F -           -   matmul,softmax,where
multi_head_attention_forward ops.attention.multi_head_attention_forward F -           -   matmul,softmax,linear
dist              ops.distance.dist                   fn,method       -            -   sub,vector_norm
cdist             ops.distance.cdist                  fn              -            -   sub,abs,sum,pow_scalar,amax
# ----- statistics, differences and integrals ------------------------------------------------------------------
histc             ops.statistics.histc                fn,method,out   -            -   numpy
bincount          ops.statistics.bincount             fn,method       -            -   numpy
diff              ops.calculus.diff                   fn,method       -            -   slice,sub,cat
cov               ops.statistics.cov                  fn,method       -            -   mean,sub,mul,matmul,div
corrcoef          ops.statistics.corrcoef             fn,method       -            -   cov,sqrt,div,clamp,numpy
histogram         ops.statistics.histogram            fn,method,out   -            -   numpy
histogramdd       ops.statistics.histogramdd          fn              -            -   numpy
cumulative_trapezoid ops.calculus.cumulative_trapezoid fn              -            -   slice,add,mul,cumsum,numpy
gradient          ops.calculus.gradient               fn              -            -   index_select,mul,add,numpy
trapezoid         ops.calculus.trapezoid              fn              -            -   slice,add,mul,sum
trapz             ops.calculus.trapezoid              fn              -            -   slice,add,mul,sum
# ----- complex-number helpers on real tensors (dyngrad has no complex dtypes) ---------------------------------
is_complex        ops.complex.is_complex              fn,method       -            -   -
angle             ops.complex.angle                   fn,method,out   -            -   numpy
imag              ops.complex.imag                    fn              -            -   -
is_conj           ops.complex.is_conj                 fn,method       -            -   -
is_neg            ops.complex.is_neg                  fn,method       -            -   -
resolve_conj      ops.complex.resolve_conj            fn,method       -            -   -
resolve_neg       ops.complex.resolve_neg             fn,method       -            -   -
conj              ops.complex.conj                    fn,method       -            -   -
conj_physical     ops.complex.conj_physical           fn,method,out   -            -   -
conj_physical_    ops.complex.conj_physical_          method          -            -   -
adjoint           ops.complex.adjoint                 fn,method       -            -   mT
real              ops.complex.real                    fn,prop         -            -   -
imag              ops.complex.imag                    prop            -            -   -
H                 ops.complex.H                       prop            -            -   mT
mH                ops.complex.mH                      prop            -            -   mT
# ----- about a tensor: predicates and the queries a script asks of any tensor ---------------------------------
is_nonzero        ops.tensor.is_nonzero               fn,method       -            -   numpy
is_same_size      ops.tensor.is_same_size             fn,method       -            -   -
is_signed         ops.tensor.is_signed                fn,method       -            -   -
nbytes            ops.tensor.nbytes                   prop            -            -   -
itemsize          ops.tensor.itemsize                 prop            -            -   -
get_device        device.get_device                   fn              -            -   -
is_sparse         ops.tensor.is_sparse                prop            -            -   -
is_sparse_csr     ops.tensor.is_sparse_csr            prop            -            -   -
is_quantized      ops.tensor.is_quantized             prop            -            -   -
is_nested         ops.tensor.is_nested                prop            -            -   -
is_mkldnn         ops.tensor.is_mkldnn                prop            -            -   -
is_mps            ops.tensor.is_mps                   prop            -            -   -
is_xpu            ops.tensor.is_xpu                   prop            -            -   -
is_xla            ops.tensor.is_xla                   prop            -            -   -
is_ipu            ops.tensor.is_ipu                   prop            -            -   -
is_vulkan         ops.tensor.is_vulkan                prop            -            -   -
is_maia           ops.tensor.is_maia                  prop            -            -   -
is_mtia           ops.tensor.is_mtia                  prop            -            -   -
is_pinned         ops.tensor.is_pinned                method          -            -   -
pin_memory        ops.tensor.pin_memory               method          -            -   -
is_inference      ops.tensor.is_inference             fn,method       -            -   -
to_dense          ops.tensor.to_dense                 method          -            -   to_dtype
dim_order         ops.tensor.dim_order                method          -            -   -
const_data_ptr    ops.tensor.const_data_ptr           method          -            -   -
# ----- function transforms ------------------------------------------------------------------------------------
vmap              ops.vmap.vmap                       fn              -            -   select,stack
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
__init__          ops.tensor.__init__                 op              -            -   -
FloatTensor       ops.tensor.FloatTensor              fn              -            -   to_dtype
DoubleTensor      ops.tensor.DoubleTensor             fn              -            -   to_dtype
LongTensor        ops.tensor.LongTensor               fn              -            -   to_dtype
BoolTensor        ops.tensor.BoolTensor               fn              -            -   to_dtype
IntTensor         ops.tensor.IntTensor                fn              -            -   to_dtype
ShortTensor       ops.tensor.ShortTensor              fn              -            -   to_dtype
CharTensor        ops.tensor.CharTensor               fn              -            -   to_dtype
ByteTensor        ops.tensor.ByteTensor               fn              -            -   to_dtype
HalfTensor        ops.tensor.HalfTensor               fn              -            -   to_dtype
BFloat16Tensor    ops.tensor.BFloat16Tensor           fn              -            -   to_dtype
__repr__          ops.tensor.__repr__                 op              -            -   numpy
__str__           ops.tensor.__repr__                 op              -            -   numpy
__format__        ops.tensor.__format__               op              -            -   -
__len__           ops.tensor.__len__                  op              -            -   -
__iter__          ops.tensor.__iter__                 op              -            -   select
__bool__          ops.tensor.__bool__                 op              -            -   -
__float__         ops.tensor.__float__                op              -            -   -
__int__           ops.tensor.__int__                  op              -            -   -
__complex__       ops.tensor.__complex__              op              -            -   -
__index__         ops.tensor.__index__                op              -            -   -
__contains__      ops.tensor.__contains__             op              -            -   compare,sum
__array__         ops.tensor.__array__                op              -            -   numpy
__reduce_ex__     ops.tensor.__reduce_ex__            op              -            -   copy_from_numpy,numpy
__deepcopy__      ops.tensor.__deepcopy__             op              -            -   copy_from_numpy,numpy
tolist            ops.tensor.tolist                   method          -            -   numpy
numpy             ops.tensor.numpy                    method          -            -   numpy
to                ops.tensor.to                       method          -            -   to_dtype
type              ops.tensor.type_method              method          -            -   to_dtype
type_as           ops.tensor.type_as                  method          -            -   to_dtype
float             ops.tensor.to_float32               method          -            -   to_dtype
double            ops.tensor.to_float64               method          -            -   to_dtype
long              ops.tensor.to_int64                 method          -            -   to_dtype
int               ops.tensor.to_int32                 method          -            -   to_dtype
bool              ops.tensor.to_bool                  method          -            -   to_dtype
short             ops.tensor.to_int16                 method          -            -   to_dtype
char              ops.tensor.to_int8                  method          -            -   to_dtype
byte              ops.tensor.to_uint8                 method          -            -   to_dtype
half              ops.tensor.to_float16               method          -            -   to_dtype
bfloat16          ops.tensor.to_bfloat16              method          -            -   to_dtype
cpu               ops.tensor.cpu                      method          -            -   -
cuda              device.cuda                         method          -            -   -
device            device.tensor_device                prop            -            -   -
is_cpu            device.is_cpu                       prop            -            -   -
is_cuda           device.is_cuda                      prop            -            -   -
is_meta           device.is_meta                      prop            -            -   -
get_device        device.get_device                   method          -            -   -
ndimension        ops.tensor.ndimension               method          -            -   -
nelement          ops.tensor.nelement                 method          -            -   -
is_floating_point ops.tensor.is_floating_point        method          -            -   -
requires_grad_    ops.tensor.requires_grad_           method          -            -   -
backward          ops.tensor.backward                 method          -            -   _run_backward
zero_             ops.tensor.zero_                    method          -            -   zero_
fill_             ops.tensor.fill_                    method          -            -   fill_
copy_             ops.tensor.copy_                    method          -            -   copy_
uniform_          ops.random.uniform_                 method          -            -   rand
normal_           ops.random.normal_                  method          -            -   randn
bernoulli_        ops.random.bernoulli_               method          -            -   rand,compare
new               ops.tensor.new                      method          -            -   empty,copy_from_numpy
detach            ops.tensor.detach                   fn              -            -   -
apply_            ops.tensor.apply_                   method          -            -   assign_inplace,numpy
map_              ops.tensor.map_                     method          -            -   assign_inplace,numpy
map2_             ops.tensor.map2_                    method          -            -   assign_inplace,numpy
from_dlpack       ops.dlpack.from_dlpack              fn              -            -   from_numpy,numpy
to_dlpack         ops.dlpack.to_dlpack                fn              -            -   numpy
__dlpack__        ops.dlpack.__dlpack__               op              -            -   numpy
__dlpack_device__ ops.dlpack.__dlpack_device__        op              -            -   -
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
__add__           ops.tensor.OPERATORS                op              -            hot add
__radd__          ops.tensor.OPERATORS                op              -            hot add
__sub__           ops.tensor.OPERATORS                op              -            hot sub
__rsub__          ops.tensor.OPERATORS                op              -            hot sub
__mul__           ops.tensor.OPERATORS                op              -            hot mul
__rmul__          ops.tensor.OPERATORS                op              -            hot mul
__truediv__       ops.tensor.OPERATORS                op              -            hot div
__rtruediv__      ops.tensor.OPERATORS                op              -            hot div
__rdiv__          ops.tensor.OPERATORS                op              -            -   div
__matmul__        ops.tensor.OPERATORS                op              -            hot matmul
__rmatmul__       ops.tensor.OPERATORS                op              -            hot matmul
__pow__           ops.tensor.OPERATORS                op              -            -   pow,pow_scalar
__rpow__          ops.tensor.OPERATORS                op              -            -   pow
__neg__           ops.tensor.OPERATORS                op              -            -   neg
__pos__           ops.tensor.OPERATORS                op              -            -   -
__abs__           ops.tensor.OPERATORS                op              -            -   abs
__invert__        ops.tensor.OPERATORS                op              -            -   bitwise_not,numpy
__and__           ops.tensor.OPERATORS                op              -            -   bitwise_and,numpy
__rand__          ops.tensor.OPERATORS                op              -            -   bitwise_and,numpy
__or__            ops.tensor.OPERATORS                op              -            -   bitwise_or,numpy
__ror__           ops.tensor.OPERATORS                op              -            -   bitwise_or,numpy
__xor__           ops.tensor.OPERATORS                op              -            -   bitwise_xor,numpy
__rxor__          ops.tensor.OPERATORS                op              -            -   bitwise_xor,numpy
__lshift__        ops.tensor.OPERATORS                op              -            -   bitwise_left_shift,numpy
__rlshift__       ops.tensor.OPERATORS                op              -            -   bitwise_left_shift,numpy
__rshift__        ops.tensor.OPERATORS                op              -            -   bitwise_right_shift,numpy
__rrshift__       ops.tensor.OPERATORS                op              -            -   bitwise_right_shift,numpy
__mod__           ops.tensor.OPERATORS                op              -            -   remainder,numpy
__rmod__          ops.tensor.OPERATORS                op              -            -   remainder,numpy
__floordiv__      ops.tensor.OPERATORS                op              -            -   floor_divide,numpy
__rfloordiv__     ops.tensor.OPERATORS                op              -            -   floor_divide,numpy
__eq__            ops.tensor.OPERATORS                op              -            -   compare
__ne__            ops.tensor.OPERATORS                op              -            -   compare
__lt__            ops.tensor.OPERATORS                op              -            -   compare
__le__            ops.tensor.OPERATORS                op              -            -   compare
__gt__            ops.tensor.OPERATORS                op              -            -   compare
__ge__            ops.tensor.OPERATORS                op              -            -   compare
__iadd__          ops.tensor.INPLACE_OPERATORS        op              -            -   add
__isub__          ops.tensor.INPLACE_OPERATORS        op              -            -   sub
__imul__          ops.tensor.INPLACE_OPERATORS        op              -            -   mul
__itruediv__      ops.tensor.INPLACE_OPERATORS        op              -            -   div
__imod__          ops.tensor.INPLACE_OPERATORS        op              -            -   remainder,numpy
__ifloordiv__     ops.tensor.INPLACE_OPERATORS        op              -            -   floor_divide,numpy
__iand__          ops.tensor.INPLACE_OPERATORS        op              -            -   bitwise_and,numpy
__ior__           ops.tensor.INPLACE_OPERATORS        op              -            -   bitwise_or,numpy
__ixor__          ops.tensor.INPLACE_OPERATORS        op              -            -   bitwise_xor,numpy
__ilshift__       ops.tensor.INPLACE_OPERATORS        op              -            -   bitwise_left_shift,numpy
__irshift__       ops.tensor.INPLACE_OPERATORS        op              -            -   bitwise_right_shift,numpy
"""

# ----- torch.X_: the function forms of the in-place Tensor methods (torch.abs_(x) is x.abs_()), one row each, made
# by rows() from this list (impl inplace.FUNCTIONS, kind fn, uses the method)
INPLACE_FUNCTIONS = """
abs_ acos_ acosh_ addmv_ arccos_ arccosh_ arcsin_ arcsinh_ arctan_ arctanh_ as_strided_ asin_ asinh_ atan_ atanh_
ceil_ clamp_ clamp_max_ clamp_min_ clip_ cos_ cosh_ deg2rad_ detach_ erf_ erfc_ exp2_ exp_ expm1_ fix_ floor_ frac_
gcd_ i0_ index_put_ lcm_ ldexp_ log10_ log1p_ log2_ log_ logit_ nan_to_num_ neg_ negative_ rad2deg_ reciprocal_
round_ rsqrt_ sigmoid_ sin_ sinc_ sinh_ sqrt_ square_ tan_ tanh_ trunc_ xlogy_ conj_physical_ fill_ zero_
""".split()


KINDS = ("fn", "method", "prop", "op", "F", "special", "linalg", "masked", "out")


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
    # torch.X_ runs Tensor.X_: it reaches the numpy bridge when that method does (its row, or the row it is the
    # in-place variant of, says so)
    bridged = {r.inplace for r in out if r.inplace and "numpy" in r.uses} | {
        r.name for r in out if "method" in r.kinds and "numpy" in r.uses}
    out += [Row(name, "inplace.FUNCTIONS", "fn", "-", "-", f"Tensor.{name}" + (",numpy" if name in bridged else ""))
            for name in INPLACE_FUNCTIONS]
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
