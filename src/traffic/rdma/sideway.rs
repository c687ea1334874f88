//! The one struct that talks to libibverbs: [`SidewayVerbs`], over the
//! `sideway` crate, and [`SidewayProvider`], which lists and opens devices.
//!
//! libibverbs is loaded at run time: sideway links rdma-core-mummy, a small
//! static library whose constructor `dlopen`s `libibverbs.so.1` and whose
//! `ibv_*` functions return EOPNOTSUPP when it is missing, so the wirescope
//! binary has no `NEEDED libibverbs` and starts on hosts without rdma-core.
//! [`SidewayProvider::library`] asks the dynamic loader itself, so "no
//! library" and "no device" are told apart.
//!
//! Nothing else in wirescope calls verbs: the engine loop runs over the
//! [`Verbs`] trait. This struct cannot run on a host without an RDMA device
//! (a soft-RoCE `rxe` device is enough); everything it does is checked by the
//! compiler here and exercised on such a host.
//!
//! Raw calls beyond sideway (completion events: `ibv_req_notify_cq`,
//! `ibv_get_cq_event`, `ibv_ack_cq_events`) go through rdma-mummy-sys, the
//! same stub sideway uses.

use super::setup::Fabric;
use super::verbs::{
    Completion, ConnectAttrs, Cq, LocalQp, PortInfo, QpConfig, SendWr, Verbs, VerbsError,
    VerbsProvider, WrOp,
};
use sideway::ibverbs::address::{AddressHandleAttribute, Gid};
use sideway::ibverbs::completion::{
    CompletionChannel, CompletionQueue, GenericCompletionQueue, PollCompletionQueueError,
};
use sideway::ibverbs::device::{DeviceInfo, DeviceList};
use sideway::ibverbs::device_context::{DeviceContext, LinkLayer, Mtu, PortState};
use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::queue_pair::{
    GenericQueuePair, PostSendGuard, QueuePair, QueuePairAttribute, QueuePairState, SetInlineData,
    SetScatterGatherEntry, WorkRequestFlags,
};
use sideway::ibverbs::AccessFlags;
use std::alloc::Layout;
use std::net::Ipv6Addr;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Duration;

/// The soname rdma-core-mummy loads.
pub const LIBIBVERBS: &str = "libibverbs.so.1";

/// Completions taken per poll.
const POLL_BATCH: usize = 64;

/// The libibverbs-backed provider.
#[derive(Debug, Default, Clone, Copy)]
pub struct SidewayProvider;

impl VerbsProvider for SidewayProvider {
    fn library(&self) -> Result<(), VerbsError> {
        let name = c"libibverbs.so.1";
        // SAFETY: dlopen with a valid C string; the handle is closed right away
        // (rdma-core-mummy holds its own reference when the library exists).
        let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
        if h.is_null() {
            // SAFETY: dlerror returns a thread-local C string or NULL.
            let e = unsafe { libc::dlerror() };
            let msg = if e.is_null() {
                format!("{LIBIBVERBS}: cannot be loaded")
            } else {
                // SAFETY: non-null dlerror result is a valid C string.
                unsafe { std::ffi::CStr::from_ptr(e) }
                    .to_string_lossy()
                    .into_owned()
            };
            return Err(VerbsError::NoLibrary(msg));
        }
        // SAFETY: h came from dlopen above.
        unsafe { libc::dlclose(h) };
        Ok(())
    }

    fn devices(&self) -> Result<Vec<String>, VerbsError> {
        self.library()?;
        let list = DeviceList::new().map_err(|e| call("ibv_get_device_list", "all devices", e))?;
        Ok(list.iter().map(|d| d.name()).collect())
    }

    fn open(&self, device: &str, port: u8) -> Result<Box<dyn Verbs>, VerbsError> {
        Ok(Box::new(SidewayVerbs::open(device, port)?))
    }
}

/// A page-aligned, zeroed buffer that the NIC reads and writes.
struct DmaBuffer {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: the buffer is plain memory owned by this struct; the NIC accesses it
// only while the MR registered on it exists, which SidewayVerbs drops first.
unsafe impl Send for DmaBuffer {}

impl DmaBuffer {
    fn new(len: u64, device: &str) -> Result<Self, VerbsError> {
        let err = |what: &str| VerbsError::Call {
            call: "allocate buffer",
            device: device.to_string(),
            source: std::io::Error::other(what.to_string()),
        };
        let len = usize::try_from(len).map_err(|_| err("length does not fit in memory"))?;
        let layout = Layout::from_size_align(len.max(1), 4096).map_err(|_| err("bad layout"))?;
        // SAFETY: layout has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(p).ok_or_else(|| err("out of memory"))?;
        Ok(DmaBuffer { ptr, layout })
    }

    fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }
}

impl Drop for DmaBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

/// One opened port with its QPs, CQs and registered buffers.
///
/// Field order is drop order: QPs, CQs and channels before the MRs, the MRs
/// before the buffers they cover.
pub struct SidewayVerbs {
    qps: Vec<GenericQueuePair>,
    send_cq: Option<GenericCompletionQueue>,
    recv_cq: Option<GenericCompletionQueue>,
    send_channel: Option<Arc<CompletionChannel>>,
    recv_channel: Option<Arc<CompletionChannel>>,
    mrs: Vec<Arc<MemoryRegion>>,
    pd: Option<Arc<ProtectionDomain>>,
    ctx: Arc<DeviceContext>,
    bufs: Vec<DmaBuffer>,
    name: String,
    port: u8,
}

/// An error and its sources (sideway's errors say "failed to ..." and keep the errno below).
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

fn call(call: &'static str, device: &str, e: impl std::error::Error) -> VerbsError {
    VerbsError::Call {
        call,
        device: device.to_string(),
        source: std::io::Error::other(chain(&e)),
    }
}

fn mtu_bytes(m: Mtu) -> u32 {
    match m {
        Mtu::Mtu256 => 256,
        Mtu::Mtu512 => 512,
        Mtu::Mtu1024 => 1024,
        Mtu::Mtu2048 => 2048,
        Mtu::Mtu4096 => 4096,
    }
}

fn mtu_enum(bytes: u32) -> Mtu {
    match bytes {
        0..=256 => Mtu::Mtu256,
        257..=512 => Mtu::Mtu512,
        513..=1024 => Mtu::Mtu1024,
        1025..=2048 => Mtu::Mtu2048,
        _ => Mtu::Mtu4096,
    }
}

impl SidewayVerbs {
    /// Open `device` and check `port` exists.
    pub fn open(device: &str, port: u8) -> Result<Self, VerbsError> {
        SidewayProvider.library()?;
        // ENOSYS here: libibverbs is there but the kernel has no RDMA device/uverbs.
        let list = DeviceList::new().map_err(|e| VerbsError::NoDevice {
            name: device.to_string(),
            seen: format!("none, ibv_get_device_list: {}", chain(&e)),
        })?;
        let names: Vec<String> = list.iter().map(|d| d.name()).collect();
        let dev = list
            .iter()
            .find(|d| d.name() == device)
            .ok_or_else(|| VerbsError::NoDevice {
                name: device.to_string(),
                seen: if names.is_empty() {
                    "none".into()
                } else {
                    names.join(", ")
                },
            })?;
        let ctx = dev.open().map_err(|e| call("ibv_open_device", device, e))?;
        let v = SidewayVerbs {
            qps: Vec::new(),
            send_cq: None,
            recv_cq: None,
            send_channel: None,
            recv_channel: None,
            mrs: Vec::new(),
            pd: None,
            ctx,
            bufs: Vec::new(),
            name: format!("{device} port {port}"),
            port,
        };
        v.port_info()?;
        Ok(v)
    }

    fn cq(&self, which: Cq) -> Result<&GenericCompletionQueue, VerbsError> {
        match which {
            Cq::Send => self.send_cq.as_ref(),
            Cq::Recv => self.recv_cq.as_ref(),
        }
        .ok_or_else(|| {
            VerbsError::Port(format!(
                "{}: no completion queue yet (create first)",
                self.name
            ))
        })
    }

    fn build_cq(
        &self,
        cqe: u32,
        channel: Option<&Arc<CompletionChannel>>,
    ) -> Result<GenericCompletionQueue, VerbsError> {
        let mut b = self.ctx.create_cq_builder();
        b.setup_cqe(cqe);
        if let Some(ch) = channel {
            b.setup_comp_channel(ch, 0);
        }
        // The extended CQ (ibv_create_cq_ex) where the provider has it, else the classic one.
        match b.build_ex() {
            Ok(cq) => Ok(GenericCompletionQueue::from(cq)),
            Err(_) => b
                .build()
                .map(GenericCompletionQueue::from)
                .map_err(|e| call("ibv_create_cq", &self.name, e)),
        }
    }
}

impl SidewayVerbs {
    /// QP `qp`, its buffer's lkey and the address of `[offset, offset + len)`,
    /// checked to lie inside the buffer.
    fn slot(
        &mut self,
        qp: usize,
        offset: u64,
        len: u32,
    ) -> Result<(&mut GenericQueuePair, u32, u64), VerbsError> {
        let name = &self.name;
        let (Some(q), Some(mr), Some(buf)) =
            (self.qps.get_mut(qp), self.mrs.get(qp), self.bufs.get(qp))
        else {
            return Err(VerbsError::Port(format!("{name}: no QP {qp}")));
        };
        if offset.saturating_add(u64::from(len)) > buf.layout.size() as u64 {
            return Err(VerbsError::Port(format!(
                "{name}: work request past the end of QP {qp}'s buffer"
            )));
        }
        Ok((q, mr.lkey(), buf.addr() + offset))
    }
}

impl Verbs for SidewayVerbs {
    fn device(&self) -> &str {
        &self.name
    }

    fn port_info(&self) -> Result<PortInfo, VerbsError> {
        let a = self
            .ctx
            .query_port(self.port)
            .map_err(|e| call("ibv_query_port", &self.name, e))?;
        let fabric = match a.link_layer() {
            LinkLayer::Ethernet => Fabric::Ethernet,
            _ => Fabric::Infiniband,
        };
        let max_rd_atomic = self
            .ctx
            .query_device()
            .map(|d| u8::try_from(d.max_qp_rd_atom().clamp(1, 255)).unwrap_or(16))
            .unwrap_or(16);
        Ok(PortInfo {
            max_rd_atomic,
            active: a.port_state() == PortState::Active,
            active_mtu: mtu_bytes(a.active_mtu()),
            max_mtu: mtu_bytes(a.max_mtu()),
            lid: a.lid(),
            fabric,
        })
    }

    fn gid(&self, index: u32) -> Result<[u8; 16], VerbsError> {
        let g = self
            .ctx
            .query_gid(self.port, index)
            .map_err(|e| call("ibv_query_gid", &self.name, e))?;
        Ok(Ipv6Addr::from(g).octets())
    }

    fn create(&mut self, cfg: &QpConfig) -> Result<Vec<LocalQp>, VerbsError> {
        let pd = self
            .ctx
            .alloc_pd()
            .map_err(|e| call("ibv_alloc_pd", &self.name, e))?;
        if cfg.use_event {
            let ch = |v: &Self| {
                let c = v
                    .ctx
                    .create_comp_channel()
                    .map_err(|e| call("ibv_create_comp_channel", &v.name, e))?;
                c.set_nonblocking(true)
                    .map_err(|e| call("fcntl O_NONBLOCK completion channel", &v.name, e))?;
                Ok::<_, VerbsError>(c)
            };
            self.send_channel = Some(ch(self)?);
            self.recv_channel = Some(ch(self)?);
        }
        let send = self.build_cq(
            cfg.qps.saturating_mul(cfg.tx_depth).max(1),
            self.send_channel.as_ref(),
        )?;
        let recv = self.build_cq(
            cfg.qps.saturating_mul(cfg.rx_depth).max(1),
            self.recv_channel.as_ref(),
        )?;
        let access = AccessFlags::LocalWrite | AccessFlags::RemoteWrite | AccessFlags::RemoteRead;
        let mut out = Vec::new();
        for i in 0..cfg.qps {
            let buf = DmaBuffer::new(cfg.buffer_len, &self.name)?;
            // SAFETY: the buffer is valid for buffer_len bytes and outlives the MR
            // (field order of SidewayVerbs drops MRs before buffers).
            let mr = unsafe { pd.reg_mr(buf.addr() as usize, cfg.buffer_len as usize, access) }
                .map_err(|e| call("ibv_reg_mr", &self.name, e))?;
            let mut b = pd.create_qp_builder();
            b.setup_max_send_wr(cfg.tx_depth)
                .setup_max_recv_wr(cfg.rx_depth)
                .setup_max_send_sge(1)
                .setup_max_recv_sge(1)
                .setup_max_inline_data(cfg.max_inline)
                .setup_send_cq(send.clone())
                .setup_recv_cq(recv.clone());
            let qp = match b.build_ex() {
                Ok(q) => GenericQueuePair::from(q),
                Err(_) => GenericQueuePair::from(
                    b.build()
                        .map_err(|e| call("ibv_create_qp", &format!("{} QP {i}", self.name), e))?,
                ),
            };
            out.push(LocalQp {
                qpn: qp.qp_number(),
                rkey: mr.rkey(),
                addr: buf.addr(),
                len: cfg.buffer_len,
            });
            self.qps.push(qp);
            self.mrs.push(mr);
            self.bufs.push(buf);
        }
        self.send_cq = Some(send);
        self.recv_cq = Some(recv);
        self.pd = Some(pd);
        Ok(out)
    }

    fn connect(&mut self, qp: usize, a: &ConnectAttrs) -> Result<(), VerbsError> {
        let name = format!("{} QP {qp}", self.name);
        let port = self.port;
        let q = self
            .qps
            .get_mut(qp)
            .ok_or_else(|| VerbsError::Port(format!("{name}: no such QP")))?;
        let access = AccessFlags::LocalWrite | AccessFlags::RemoteWrite | AccessFlags::RemoteRead;
        let mut init = QueuePairAttribute::new();
        init.setup_state(QueuePairState::Init)
            .setup_pkey_index(0)
            .setup_port(port)
            .setup_access_flags(access);
        q.modify(&init)
            .map_err(|e| call("ibv_modify_qp INIT", &name, e))?;
        let mut ah = AddressHandleAttribute::new();
        ah.setup_dest_lid(a.remote_lid)
            .setup_port(port)
            .setup_service_level(0);
        if let Some(g) = a.remote_gid {
            let gid = Gid::from(Ipv6Addr::from(g));
            let sgid = u8::try_from(a.gid_index.unwrap_or(0)).unwrap_or(0);
            ah.setup_grh(&gid, 0, sgid, 64, 0);
        }
        let mut rtr = QueuePairAttribute::new();
        rtr.setup_state(QueuePairState::ReadyToReceive)
            .setup_path_mtu(mtu_enum(a.path_mtu))
            .setup_dest_qp_num(a.remote_qpn)
            .setup_rq_psn(a.remote_psn)
            .setup_max_dest_read_atomic(a.max_rd_atomic)
            .setup_min_rnr_timer(12)
            .setup_address_vector(&ah);
        q.modify(&rtr)
            .map_err(|e| call("ibv_modify_qp RTR", &name, e))?;
        let mut rts = QueuePairAttribute::new();
        rts.setup_state(QueuePairState::ReadyToSend)
            .setup_sq_psn(a.local_psn)
            .setup_timeout(14)
            .setup_retry_cnt(7)
            .setup_rnr_retry(7)
            .setup_max_read_atomic(a.max_rd_atomic);
        q.modify(&rts)
            .map_err(|e| call("ibv_modify_qp RTS", &name, e))
    }

    fn post_send(&mut self, qp: usize, wr: &SendWr) -> Result<(), VerbsError> {
        let (q, lkey, addr) = self.slot(qp, wr.offset, wr.len)?;
        let mut flags = WorkRequestFlags::none();
        if wr.signaled {
            flags |= WorkRequestFlags::Signaled;
        }
        if wr.inline {
            flags |= WorkRequestFlags::Inline;
        }
        let mut guard = q.start_post_send();
        let h = guard.construct_wr(wr.wr_id, flags);
        let h = match wr.op {
            WrOp::Write { remote_addr, rkey } => h.setup_write(rkey, remote_addr),
            WrOp::Read { remote_addr, rkey } => h.setup_read(rkey, remote_addr),
            WrOp::Send => h.setup_send(),
        };
        if wr.inline {
            // SAFETY: [offset, offset + len) is inside the buffer (checked above);
            // inline data is the send region, which the peer never writes.
            let data = unsafe { std::slice::from_raw_parts(addr as *const u8, wr.len as usize) };
            h.setup_inline_data(data);
        } else {
            // SAFETY: the range is inside the registered buffer, which outlives the WR.
            unsafe { h.setup_sge(lkey, addr, wr.len) };
        }
        guard
            .post()
            .map_err(|e| call("ibv_post_send", &format!("{} QP {qp}", self.name), e))
    }

    fn post_recv(
        &mut self,
        qp: usize,
        wr_id: u64,
        offset: u64,
        len: u32,
    ) -> Result<(), VerbsError> {
        let (q, lkey, addr) = self.slot(qp, offset, len)?;
        let mut guard = q.start_post_recv();
        let h = guard.construct_wr(wr_id);
        // SAFETY: the range is inside the registered buffer, which outlives the WR.
        unsafe { h.setup_sge(lkey, addr, len) };
        guard
            .post()
            .map_err(|e| call("ibv_post_recv", &format!("{} QP {qp}", self.name), e))
    }

    fn poll(&mut self, which: Cq, out: &mut Vec<Completion>) -> Result<(), VerbsError> {
        let cq = self.cq(which)?;
        match cq.start_poll() {
            Ok(poller) => {
                for wc in poller.take(POLL_BATCH) {
                    out.push(Completion {
                        wr_id: wc.wr_id(),
                        status: wc.status(),
                        byte_len: wc.byte_len(),
                    });
                }
                Ok(())
            }
            Err(PollCompletionQueueError::CompletionQueueEmpty) => Ok(()),
            Err(e) => Err(call("ibv_poll_cq", &self.name, e)),
        }
    }

    fn wait(&mut self, which: Cq, timeout: Duration) -> Result<bool, VerbsError> {
        let channel = match which {
            Cq::Send => self.send_channel.as_ref(),
            Cq::Recv => self.recv_channel.as_ref(),
        }
        .ok_or_else(|| VerbsError::Port(format!("{}: created without --use-event", self.name)))?;
        let cq = self.cq(which)?;
        // SAFETY: the CQ handle is valid while `self` holds it.
        let rc = unsafe { rdma_mummy_sys::ibv_req_notify_cq(cq.cq().as_ptr(), 0) };
        if rc != 0 {
            return Err(call(
                "ibv_req_notify_cq",
                &self.name,
                std::io::Error::from_raw_os_error(rc),
            ));
        }
        let mut pfd = libc::pollfd {
            fd: channel.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(call("poll completion channel", &self.name, e));
        }
        if n == 0 {
            return Ok(false);
        }
        let mut ev_cq: *mut rdma_mummy_sys::ibv_cq = std::ptr::null_mut();
        let mut ev_ctx: *mut libc::c_void = std::ptr::null_mut();
        // SAFETY: the channel is valid and non-blocking; out-pointers are valid.
        let rc = unsafe {
            rdma_mummy_sys::ibv_get_cq_event(
                channel.comp_channel().as_ptr(),
                &mut ev_cq,
                &mut ev_ctx,
            )
        };
        if rc != 0 {
            return Ok(false);
        }
        // SAFETY: ev_cq was returned by ibv_get_cq_event; every event is acknowledged once.
        unsafe { rdma_mummy_sys::ibv_ack_cq_events(ev_cq, 1) };
        Ok(true)
    }

    fn read_byte(&self, qp: usize, offset: u64) -> u8 {
        match self.bufs.get(qp) {
            // SAFETY: in bounds; volatile because the NIC writes this memory.
            Some(b) if offset < b.layout.size() as u64 => unsafe {
                std::ptr::read_volatile(b.ptr.as_ptr().add(offset as usize))
            },
            _ => 0,
        }
    }

    fn write_byte(&mut self, qp: usize, offset: u64, value: u8) {
        if let Some(b) = self.bufs.get(qp) {
            if offset < b.layout.size() as u64 {
                // SAFETY: in bounds of our own buffer.
                unsafe { std::ptr::write_volatile(b.ptr.as_ptr().add(offset as usize), value) };
            }
        }
    }
}
