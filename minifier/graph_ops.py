"""The one table of what a rebuilt graph and a written repro.py may call (no torch here).

A capture names each graph node's target as text: "torch.sin", "_operator.mul",
"torch.ops.aten.relu.default", a method name such as "view". minify turns that text into a
callable only by finding it in this table; it never walks attributes below a module by a name
the capture gives (``torch.os.system`` is an attribute path below torch, and is not here).
The same table decides which names repro.py may use (minifier/repro_check.py).

What is here:
  * TORCH_FUNCTIONS: torch functions by the qualified name the recorder writes
    (torch.fx.node._get_qualified_name): the functions torch lists as overridable tensor
    operations (torch.overrides.get_overridable_functions), the public functions of
    torch._C._VariableFunctions, _nn, _linalg, _fft and _special, torch's foreach ops, and the
    few context functions Dynamo puts in graphs (grad mode, autocast, checks). Refused from
    them: torch.from_file and torch.from_numpy (read files or foreign memory).
  * operator overloads of torch.ops.aten and torch.ops.prims, looked up by namespace, operator
    and overload name, but for REFUSED_OPS (they read or write files).
  * TENSOR_METHODS: the public Tensor methods (torch.overrides' list and torch._C.TensorBase's),
    without those that take callables or hooks (apply_, map_, register_hook, ...), expose or
    share storage (storage, set_, share_memory_), or load (module_load).
  * OPERATOR_FUNCTIONS, MATH_FUNCTIONS, BUILTIN_FUNCTIONS: pure arithmetic and comparisons.

A graph whose node calls anything else is refused with one line naming the node.
"""

from __future__ import annotations

import builtins
import keyword
import re

_TORCH_FUNCTIONS_BY_MODULE = {
    "torch": """
        _assert _assert_async _check _check_is_size _foreach_abs _foreach_abs_ _foreach_acos _foreach_acos_ _foreach_add
        _foreach_add_ _foreach_addcdiv _foreach_addcdiv_ _foreach_addcmul _foreach_addcmul_ _foreach_asin _foreach_asin_
        _foreach_atan _foreach_atan_ _foreach_ceil _foreach_ceil_ _foreach_clamp_max _foreach_clamp_max_
        _foreach_clamp_min _foreach_clamp_min_ _foreach_clone _foreach_copy_ _foreach_cos _foreach_cos_ _foreach_cosh
        _foreach_cosh_ _foreach_div _foreach_div_ _foreach_erf _foreach_erf_ _foreach_erfc _foreach_erfc_ _foreach_exp
        _foreach_exp_ _foreach_expm1 _foreach_expm1_ _foreach_floor _foreach_floor_ _foreach_frac _foreach_frac_
        _foreach_lerp _foreach_lerp_ _foreach_lgamma _foreach_lgamma_ _foreach_log _foreach_log10 _foreach_log10_
        _foreach_log1p _foreach_log1p_ _foreach_log2 _foreach_log2_ _foreach_log_ _foreach_max _foreach_maximum
        _foreach_maximum_ _foreach_minimum _foreach_minimum_ _foreach_mm _foreach_mul _foreach_mul_ _foreach_neg
        _foreach_neg_ _foreach_norm _foreach_pow _foreach_pow_ _foreach_powsum _foreach_reciprocal _foreach_reciprocal_
        _foreach_round _foreach_round_ _foreach_rsqrt _foreach_rsqrt_ _foreach_sigmoid _foreach_sigmoid_ _foreach_sign
        _foreach_sign_ _foreach_sin _foreach_sin_ _foreach_sinh _foreach_sinh_ _foreach_sqrt _foreach_sqrt_ _foreach_sub
        _foreach_sub_ _foreach_tan _foreach_tan_ _foreach_tanh _foreach_tanh_ _foreach_trunc _foreach_trunc_
        _foreach_zero_ _functional_assert_async _segment_reduce _sym_sqrt abs abs_ absolute acos acos_ acosh acosh_
        adaptive_avg_pool1d adaptive_max_pool1d add addbmm addcdiv addcmul addmm addmv addmv_ addr adjoint
        affine_grid_generator alias_copy all allclose alpha_dropout alpha_dropout_ amax amin aminmax angle any arange
        arccos arccos_ arccosh arccosh_ arcsin arcsin_ arcsinh arcsinh_ arctan arctan2 arctan_ arctanh arctanh_ argmax
        argmin argsort argwhere as_strided as_strided_ as_strided_copy as_strided_scatter as_tensor asarray asin asin_
        asinh asinh_ atan atan2 atan_ atanh atanh_ atleast_1d atleast_2d atleast_3d avg_pool1d baddbmm bartlett_window
        batch_norm batch_norm_backward_elemt batch_norm_backward_reduce batch_norm_elemt batch_norm_gather_stats
        batch_norm_gather_stats_with_counts batch_norm_stats batch_norm_update_stats bernoulli bilinear
        binary_cross_entropy_with_logits bincount binomial bitwise_and bitwise_left_shift bitwise_not bitwise_or
        bitwise_right_shift bitwise_xor blackman_window block_diag bmm broadcast_tensors broadcast_to bucketize can_cast
        cartesian_prod cat ccol_indices_copy cdist ceil ceil_ celu celu_ chain_matmul channel_shuffle cholesky
        cholesky_inverse cholesky_solve choose_qparams_optimized chunk clamp clamp_ clamp_max clamp_max_ clamp_min
        clamp_min_ clip clip_ clone col_indices_copy column_stack combinations complex concat concatenate conj
        conj_physical conj_physical_ constant_pad_nd conv1d conv2d conv3d conv_tbc conv_transpose1d conv_transpose2d
        conv_transpose3d convolution copysign corrcoef cos cos_ cosh cosh_ cosine_embedding_loss cosine_similarity
        count_nonzero cov cross crow_indices_copy ctc_loss cudnn_affine_grid_generator cudnn_batch_norm
        cudnn_convolution cudnn_convolution_add_relu cudnn_convolution_relu cudnn_convolution_transpose
        cudnn_grid_sampler cudnn_is_acceptable cummax cummin cumprod cumsum cumulative_trapezoid deg2rad deg2rad_
        dequantize det detach detach_ detach_copy diag diag_embed diagflat diagonal diagonal_copy diagonal_scatter diff
        digamma dist div divide dot dropout dropout_ dsmm dsplit dstack einsum embedding embedding_bag embedding_renorm_
        empty empty_like empty_permuted empty_quantized empty_strided eq equal erf erf_ erfc erfc_ erfinv exp exp2 exp2_
        exp_ expand_copy expm1 expm1_ eye fake_quantize_per_channel_affine fake_quantize_per_tensor_affine
        fbgemm_linear_fp16_weight fbgemm_linear_fp16_weight_fp32_activation fbgemm_linear_int8_weight
        fbgemm_linear_int8_weight_fp32_activation fbgemm_linear_quantize_weight fbgemm_pack_gemm_matrix_fp16
        fbgemm_pack_quantized_matrix feature_alpha_dropout feature_alpha_dropout_ feature_dropout feature_dropout_ fill
        fill_ fix fix_ flatten flip fliplr flipud float_power floor floor_ floor_divide fmax fmin fmod frac frac_ frexp
        frobenius_norm frombuffer full full_like fused_moving_avg_obs_fake_quant gather gcd gcd_ ge geqrf ger get_device
        gradient greater greater_equal grid_sampler grid_sampler_2d grid_sampler_3d group_norm gru gru_cell gt
        hamming_window hann_window hardshrink hash_tensor heaviside hinge_embedding_loss histc histogram histogramdd
        hsmm hsplit hspmm hstack hypot i0 i0_ igamma igammac imag index_add index_copy index_fill index_put index_put_
        index_reduce index_select indices_copy inner instance_norm int_repr inverse is_complex is_conj is_distributed
        is_floating_point is_inference is_neg is_nonzero is_same_size is_signed is_vulkan_available isclose isfinite
        isin isinf isnan isneginf isposinf isreal istft kaiser_window kl_div kron kthvalue layer_norm lcm lcm_ ldexp
        ldexp_ le lerp less less_equal lgamma linspace log log10 log10_ log1p log1p_ log2 log2_ log_ log_softmax
        logaddexp logaddexp2 logcumsumexp logdet logical_and logical_not logical_or logical_xor logit logit_ logspace
        logsumexp lstm lstm_cell lt lu_solve lu_unpack margin_ranking_loss masked_fill masked_scatter masked_select
        matmul matrix_exp matrix_power max max_pool1d max_pool1d_with_indices max_pool2d max_pool3d maximum mean median
        meshgrid min minimum miopen_batch_norm miopen_convolution miopen_convolution_add_relu miopen_convolution_relu
        miopen_convolution_transpose miopen_ctc_loss miopen_depthwise_convolution miopen_rnn mkldnn_adaptive_avg_pool2d
        mkldnn_convolution mkldnn_linear_backward_weights mkldnn_max_pool2d mkldnn_max_pool3d mkldnn_rnn_layer mm mode
        moveaxis movedim msort mul multinomial multiply mv mvlgamma nan_to_num nan_to_num_ nanmean nanmedian nanquantile
        nansum narrow narrow_copy native_batch_norm native_channel_shuffle native_dropout native_group_norm
        native_layer_norm native_norm ne neg neg_ negative negative_ nextafter nonzero nonzero_static norm
        norm_except_dim normal not_equal nuclear_norm numel ones ones_like orgqr ormqr outer pairwise_distance pdist
        permute permute_copy pinverse pixel_shuffle pixel_unshuffle poisson poisson_nll_loss polar polygamma positive
        pow prelu prod promote_types put q_per_channel_axis q_per_channel_scales q_per_channel_zero_points q_scale
        q_zero_point qr quantile quantize_per_channel quantize_per_tensor quantize_per_tensor_dynamic
        quantized_batch_norm quantized_gru_cell quantized_lstm_cell quantized_max_pool1d quantized_max_pool2d
        quantized_max_pool3d quantized_rnn_relu_cell quantized_rnn_tanh_cell rad2deg rad2deg_ rand rand_like randint
        randint_like randn randn_like randperm range ravel real reciprocal reciprocal_ relu relu_ remainder renorm
        repeat_interleave reshape resize_as_ resize_as_sparse_ resolve_conj resolve_neg result_type rms_norm rnn_relu
        rnn_relu_cell rnn_tanh rnn_tanh_cell roll rot90 round round_ row_indices_copy row_stack rrelu rrelu_ rsqrt
        rsqrt_ rsub saddmm scalar_tensor scatter scatter_add scatter_reduce searchsorted select select_copy
        select_scatter selu selu_ sgn sigmoid sigmoid_ sign signbit sin sin_ sinc sinc_ sinh sinh_ slice_copy
        slice_inverse slice_scatter slogdet smm softmax sort sparse_bsc_tensor sparse_bsr_tensor
        sparse_compressed_tensor sparse_coo_tensor sparse_csc_tensor sparse_csr_tensor split split_copy split_with_sizes
        split_with_sizes_copy spmm sqrt sqrt_ square square_ squeeze squeeze_copy sspaddmm stack std std_mean stft sub
        subtract sum svd swapaxes swapdims sym_constrain_range sym_constrain_range_for_size sym_float sym_int sym_ite
        sym_max sym_min sym_not sym_sum t t_copy take take_along_dim tan tan_ tanh tanh_ tensor tensor_split tensordot
        threshold threshold_ tile topk trace transpose transpose_copy trapezoid trapz triangular_solve tril tril_indices
        triplet_margin_loss triu triu_indices true_divide trunc trunc_ unbind unbind_copy unflatten unfold_copy
        unique_consecutive unsafe_chunk unsafe_split unsafe_split_with_sizes unsqueeze unsqueeze_copy values_copy vander
        var var_mean vdot view_as_complex view_as_complex_copy view_as_real view_as_real_copy view_copy vsplit vstack
        where xlogy xlogy_ zero_ zeros zeros_like
    """,
    "torch._C": """
        _set_grad_enabled
    """,
    "torch._C._fft": """
        fft_fft fft_fft2 fft_fftfreq fft_fftn fft_fftshift fft_hfft fft_hfft2 fft_hfftn fft_ifft fft_ifft2 fft_ifftn
        fft_ifftshift fft_ihfft fft_ihfft2 fft_ihfftn fft_irfft fft_irfft2 fft_irfftn fft_rfft fft_rfft2 fft_rfftfreq
        fft_rfftn
    """,
    "torch._C._linalg": """
        linalg__powsum linalg_cholesky linalg_cholesky_ex linalg_cond linalg_cross linalg_det linalg_diagonal linalg_eig
        linalg_eigh linalg_eigvals linalg_eigvalsh linalg_householder_product linalg_inv linalg_inv_ex linalg_ldl_factor
        linalg_ldl_factor_ex linalg_ldl_solve linalg_lstsq linalg_lu linalg_lu_factor linalg_lu_factor_ex
        linalg_lu_solve linalg_matmul linalg_matrix_exp linalg_matrix_norm linalg_matrix_power linalg_matrix_rank
        linalg_multi_dot linalg_norm linalg_pinv linalg_qr linalg_slogdet linalg_solve linalg_solve_ex
        linalg_solve_triangular linalg_svd linalg_svdvals linalg_tensorinv linalg_tensorsolve linalg_vander
        linalg_vecdot linalg_vector_norm
    """,
    "torch._C._nn": """
        adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool2d adaptive_max_pool3d avg_pool2d avg_pool3d
        binary_cross_entropy col2im conv_depthwise3d cross_entropy_loss elu elu_ flatten_dense_tensors
        fractional_max_pool2d fractional_max_pool3d gelu gelu_ glu hardsigmoid hardsigmoid_ hardswish hardswish_
        hardtanh hardtanh_ huber_loss im2col l1_loss leaky_relu leaky_relu_ linear log_sigmoid max_pool2d_with_indices
        max_pool3d_with_indices max_unpool2d max_unpool3d mish mish_ mkldnn_linear mkldnn_reorder_conv2d_weight
        mkldnn_reorder_conv3d_weight mse_loss multi_margin_loss multilabel_margin_loss nll_loss nll_loss2d nll_loss_nd
        one_hot pad pad_sequence reflection_pad1d reflection_pad2d reflection_pad3d relu6 relu6_ replication_pad1d
        replication_pad2d replication_pad3d rrelu_with_noise rrelu_with_noise_ scaled_dot_product_attention silu silu_
        slow_conv3d slow_conv_dilated2d slow_conv_dilated3d slow_conv_transpose2d slow_conv_transpose3d smooth_l1_loss
        soft_margin_loss softplus softshrink thnn_conv2d unflatten_dense_tensors upsample_bicubic2d upsample_bilinear2d
        upsample_linear1d upsample_nearest1d upsample_nearest2d upsample_nearest3d upsample_trilinear3d
    """,
    "torch._C._special": """
        special_airy_ai special_bessel_j0 special_bessel_j1 special_bessel_y0 special_bessel_y1
        special_chebyshev_polynomial_t special_chebyshev_polynomial_u special_chebyshev_polynomial_v
        special_chebyshev_polynomial_w special_digamma special_entr special_erf special_erfc special_erfcx
        special_erfinv special_exp2 special_expit special_expm1 special_gammainc special_gammaincc special_gammaln
        special_hermite_polynomial_h special_hermite_polynomial_he special_i0 special_i0e special_i1 special_i1e
        special_laguerre_polynomial_l special_legendre_polynomial_p special_log1p special_log_ndtr special_log_softmax
        special_logit special_logsumexp special_modified_bessel_i0 special_modified_bessel_i1 special_modified_bessel_k0
        special_modified_bessel_k1 special_multigammaln special_ndtr special_ndtri special_polygamma special_psi
        special_round special_scaled_modified_bessel_k0 special_scaled_modified_bessel_k1
        special_shifted_chebyshev_polynomial_t special_shifted_chebyshev_polynomial_u
        special_shifted_chebyshev_polynomial_v special_shifted_chebyshev_polynomial_w special_sinc special_softmax
        special_spherical_bessel_j0 special_xlog1py special_xlogy special_zeta
    """,
    "torch._lobpcg": """
        lobpcg
    """,
    "torch._lowrank": """
        pca_lowrank svd_lowrank
    """,
    "torch.amp.autocast_mode": """
        _enter_autocast _exit_autocast autocast
    """,
    "torch.functional": """
        atleast_1d atleast_2d atleast_3d block_diag broadcast_tensors cartesian_prod cdist chain_matmul einsum lu
        meshgrid norm split stft tensordot unique unique_consecutive unravel_index
    """,
    "torch.nn.functional": """
        _threshold adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool1d adaptive_max_pool1d_with_indices
        adaptive_max_pool2d adaptive_max_pool2d_with_indices adaptive_max_pool3d adaptive_max_pool3d_with_indices
        affine_grid alpha_dropout batch_norm binary_cross_entropy binary_cross_entropy_with_logits celu
        cosine_embedding_loss cross_entropy ctc_loss dropout dropout1d dropout2d dropout3d elu embedding embedding_bag
        feature_alpha_dropout fold fractional_max_pool2d fractional_max_pool2d_with_indices fractional_max_pool3d
        fractional_max_pool3d_with_indices gaussian_nll_loss glu grid_sample group_norm gumbel_softmax hardtanh
        hinge_embedding_loss huber_loss instance_norm interpolate kl_div l1_loss layer_norm leaky_relu
        linear_cross_entropy local_response_norm log_softmax lp_pool1d lp_pool2d lp_pool3d margin_ranking_loss
        max_pool1d max_pool1d_with_indices max_pool2d max_pool2d_with_indices max_pool3d max_pool3d_with_indices
        max_unpool1d max_unpool2d max_unpool3d mish mse_loss multi_head_attention_forward multi_margin_loss
        multilabel_margin_loss multilabel_soft_margin_loss nll_loss normalize pad poisson_nll_loss relu relu6 rms_norm
        rrelu selu silu smooth_l1_loss soft_margin_loss softmax softmin softsign tanhshrink triplet_margin_loss
        triplet_margin_with_distance_loss unfold
    """,
}
TORCH_FUNCTIONS = frozenset(f"{module}.{name}" for module, names in _TORCH_FUNCTIONS_BY_MODULE.items()
                            for name in names.split())

TENSOR_METHODS = frozenset("""
    __abs__ __add__ __and__ __div__ __eq__ __floordiv__ __ge__ __getitem__ __gt__ __iadd__ __iand__ __idiv__
    __ifloordiv__ __ilshift__ __imod__ __imul__ __invert__ __ior__ __ipow__ __irshift__ __isub__ __itruediv__
    __ixor__ __le__ __lshift__ __lt__ __matmul__ __mod__ __mul__ __ne__ __neg__ __or__ __pos__ __pow__ __radd__
    __rand__ __rdiv__ __rfloordiv__ __rlshift__ __rmatmul__ __rmod__ __rmul__ __ror__ __rpow__ __rrshift__
    __rshift__ __rsub__ __rtruediv__ __rxor__ __setitem__ __sub__ __truediv__ __xor__ abs abs_ absolute absolute_
    acos acos_ acosh acosh_ add add_ addbmm addbmm_ addcdiv addcdiv_ addcmul addcmul_ addmm addmm_ addmv addmv_ addr
    addr_ adjoint all allclose amax amin aminmax angle any arccos arccos_ arccosh arccosh_ arcsin arcsin_ arcsinh
    arcsinh_ arctan arctan2 arctan2_ arctan_ arctanh arctanh_ argmax argmin argsort argwhere as_strided as_strided_
    as_strided_scatter asin asin_ asinh asinh_ atan atan2 atan2_ atan_ atanh atanh_ backward baddbmm baddbmm_
    bernoulli bernoulli_ bfloat16 bincount bitwise_and bitwise_and_ bitwise_left_shift bitwise_left_shift_
    bitwise_not bitwise_not_ bitwise_or bitwise_or_ bitwise_right_shift bitwise_right_shift_ bitwise_xor
    bitwise_xor_ bmm bool broadcast_to byte cauchy_ ccol_indices cdouble ceil ceil_ cfloat chalf char cholesky
    cholesky_inverse cholesky_solve chunk clamp clamp_ clamp_max clamp_max_ clamp_min clamp_min_ clip clip_ clone
    coalesce col_indices conj conj_physical conj_physical_ const_data_ptr contiguous copy_ copysign copysign_
    corrcoef cos cos_ cosh cosh_ count_nonzero cov cpu cross crow_indices cuda cummax cummin cumprod cumprod_ cumsum
    cumsum_ data_ptr deg2rad deg2rad_ dense_dim dequantize det detach detach_ diag diag_embed diagflat diagonal
    diagonal_scatter diff digamma digamma_ dim dim_order dist div div_ divide divide_ dot double dsplit element_size
    eq eq_ equal erf erf_ erfc erfc_ erfinv erfinv_ exp exp2 exp2_ exp_ expand expand_as expm1 expm1_ exponential_
    fill_ fill_diagonal_ fix fix_ flatten flip fliplr flipud float float_power float_power_ floor floor_
    floor_divide floor_divide_ fmax fmin fmod fmod_ frac frac_ frexp gather gcd gcd_ ge ge_ geometric_ geqrf ger
    get_device greater greater_ greater_equal greater_equal_ gt gt_ half hardshrink hash_tensor heaviside heaviside_
    histc histogram hsplit hypot hypot_ i0 i0_ igamma igamma_ igammac igammac_ index index_add index_add_ index_copy
    index_copy_ index_fill index_fill_ index_put index_put_ index_reduce index_reduce_ index_select indices inner
    int int_repr inverse ipu is_coalesced is_complex is_conj is_contiguous is_distributed is_floating_point
    is_inference is_neg is_nonzero is_pinned is_same_size is_signed isclose isfinite isinf isnan isneginf isposinf
    isreal istft item kron kthvalue lcm lcm_ ldexp ldexp_ le le_ lerp lerp_ less less_ less_equal less_equal_ lgamma
    lgamma_ log log10 log10_ log1p log1p_ log2 log2_ log_ log_normal_ log_softmax logaddexp logaddexp2 logcumsumexp
    logdet logical_and logical_and_ logical_not logical_not_ logical_or logical_or_ logical_xor logical_xor_ logit
    logit_ logsumexp long lt lt_ lu lu_solve masked_fill masked_fill_ masked_scatter masked_scatter_ masked_select
    matmul matrix_exp matrix_power max maximum mean median min minimum mm mode moveaxis movedim msort mtia mul mul_
    multinomial multiply multiply_ mv mvlgamma mvlgamma_ nan_to_num nan_to_num_ nanmean nanmedian nanquantile nansum
    narrow narrow_copy ndimension ne ne_ neg neg_ negative negative_ nelement new_empty new_empty_strided new_full
    new_ones new_tensor new_zeros nextafter nextafter_ nonzero nonzero_static norm normal_ not_equal not_equal_
    numel orgqr ormqr outer permute pin_memory pinverse polygamma polygamma_ positive pow pow_ prelu prod put put_
    q_per_channel_axis q_per_channel_scales q_per_channel_zero_points q_scale q_zero_point qr qscheme quantile
    rad2deg rad2deg_ random_ ravel reciprocal reciprocal_ record_stream relu relu_ remainder remainder_ renorm
    renorm_ repeat repeat_interleave requires_grad_ reshape reshape_as resize resize_ resize_as resize_as_
    resize_as_sparse_ resolve_conj resolve_neg retain_grad roll rot90 round round_ row_indices rsqrt rsqrt_ scatter
    scatter_ scatter_add scatter_add_ scatter_reduce scatter_reduce_ select select_scatter sgn sgn_ short sigmoid
    sigmoid_ sign sign_ signbit sin sin_ sinc sinc_ sinh sinh_ size slice_inverse slice_scatter slogdet smm softmax
    sort sparse_dim sparse_mask sparse_resize_ sparse_resize_and_clear_ split split_with_sizes sqrt sqrt_ square
    square_ squeeze squeeze_ sspaddmm std stft storage_offset stride sub sub_ subtract subtract_ sum sum_to_size svd
    swapaxes swapaxes_ swapdims swapdims_ t t_ take take_along_dim tan tan_ tanh tanh_ tensor_split tile to to_dense
    to_mkldnn to_padded_tensor to_sparse to_sparse_bsc to_sparse_bsr to_sparse_coo to_sparse_csc to_sparse_csr
    tolist topk trace transpose transpose_ triangular_solve tril tril_ triu triu_ true_divide true_divide_ trunc
    trunc_ type type_as unbind unflatten unfold uniform_ unique unique_consecutive unsafe_chunk unsafe_split
    unsafe_split_with_sizes unsqueeze unsqueeze_ values var vdot view view_as vsplit where xlogy xlogy_ xpu zero_
""".split())

# operator functions as the recorder names them ("_operator.mul" or "operator.mul"). Not here:
# call, attrgetter, itemgetter, methodcaller (they build or call callables).
OPERATOR_FUNCTIONS = frozenset("""
    abs add and_ concat contains eq floordiv ge getitem gt iadd iand ifloordiv ilshift imatmul imod imul index
    invert inv ior ipow irshift is_ is_not isub itruediv ixor le lshift lt matmul mod mul ne neg not_ or_ pos pow
    rshift setitem sub truediv truth xor
""".split())

# math functions of bounded cost (factorial, comb and perm of a large int run for ever).
MATH_FUNCTIONS = frozenset("""
    acos acosh asin asinh atan atan2 atanh ceil copysign cos cosh degrees erf erfc exp expm1 fabs floor fmod frexp
    gcd hypot isclose isfinite isinf isnan ldexp lgamma log log10 log1p log2 modf pow radians remainder sin sinh
    sqrt tan tanh trunc
""".split())

# builtins Dynamo may leave in a graph, as the recorder names them (no "builtins." prefix).
# eval, exec, open, __import__, getattr and their like are not here.
BUILTIN_FUNCTIONS = frozenset("abs all any bool divmod float int isinstance len max min pow round sum".split())

OP_NAMESPACES = ("aten", "prims")
# aten operators that read or write a file they are given (aten::from_file creates and maps
# one, aten::save writes one); rebuild.py also refuses any overload with a "filename" argument.
REFUSED_OPS = frozenset({"from_file", "save"})

# torch.<name> values a graph's constants and inputs may name.
DTYPES = frozenset("""
    bfloat16 bool cdouble cfloat chalf complex128 complex32 complex64 double float float16 float32 float64
    float8_e4m3fn float8_e4m3fnuz float8_e5m2 float8_e5m2fnuz half int int16 int32 int64 int8 long short
    uint16 uint32 uint64 uint8
""".split())
LAYOUTS = frozenset("strided sparse_coo sparse_csr sparse_csc sparse_bsr sparse_bsc jagged".split())
MEMORY_FORMATS = frozenset("contiguous_format channels_last channels_last_3d preserve_format".split())

# Names the code torch.fx generates uses itself (its globals, and builtins): a graph value may
# not take one. (torch.fx's own namespace never gives a node such a name.)
RESERVED_NAMES = frozenset({"self", "torch", "device", "inf", "nan", "NoneType", "fx_pytree", "pytree"}) | frozenset(
    dir(builtins))

_OP_TARGET = re.compile(r"torch\.ops\.([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)")


def target_refusal(qualified: object) -> str | None:
    """Why a call_function target is not in the table (None: it is)."""
    if not isinstance(qualified, str):
        return "its target is not a name"
    module, _, name = qualified.rpartition(".")
    if module in ("operator", "_operator"):
        return None if name in OPERATOR_FUNCTIONS else f"target {qualified} is not an allowed graph operation"
    if module == "math":
        return None if name in MATH_FUNCTIONS else f"target {qualified} is not an allowed graph operation"
    if module in ("builtins", ""):
        return None if name in BUILTIN_FUNCTIONS else f"target {qualified} is not an allowed graph operation"
    op = op_target(qualified)
    if op is not None:
        if op[0] not in OP_NAMESPACES:
            return f"target {qualified} is not an aten or prims operator"
        return f"target {qualified} reads or writes files" if op[1] in REFUSED_OPS else None
    if qualified in TORCH_FUNCTIONS:
        return None
    return f"target {qualified} is not an allowed graph operation"


def op_target(qualified: str) -> tuple[str, str, str] | None:
    """(namespace, operator, overload) of "torch.ops.<ns>.<op>.<overload>", else None."""
    match = _OP_TARGET.fullmatch(qualified)
    if match is None or any(part.startswith("__") for part in match.groups()):
        return None
    return match.group(1), match.group(2), match.group(3)


def method_refusal(name: object) -> str | None:
    """Why a call_method target is not an allowed Tensor method (None: it is)."""
    if isinstance(name, str) and name in TENSOR_METHODS:
        return None
    return f"method {name!r} is not an allowed tensor method"


def plain_name(name: object) -> bool:
    """Whether a graph value's name can go into generated code as it is: an identifier, not
    a keyword, not a dunder, not a name the generated code uses itself."""
    return (isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)
            and not name.startswith("__") and name not in RESERVED_NAMES and len(name) <= 200)
