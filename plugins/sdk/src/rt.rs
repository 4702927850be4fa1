//! The guest runtime for `wasm32`: a small allocator and a panic handler
//! that traps. Plugins are `no_std`, so neither std's allocator nor its
//! panic formatting machinery ends up in the component.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;

const PAGE: usize = 65_536;
/// Size classes 2^4 (16 bytes) .. 2^31.
const MIN_SHIFT: u32 = 4;
const CLASSES: usize = 28;

/// A size-class allocator: every block is a power of two; freed blocks go to
/// their class's free list and are reused; fresh blocks are bumped from pages
/// obtained with `memory.grow`. Tiny, constant-time, and good enough for
/// plugins, which allocate a few small buffers per call.
struct SizeClassAlloc {
    state: UnsafeCell<State>,
}

struct State {
    free: [usize; CLASSES],
    bump: usize,
    end: usize,
}

// SAFETY: wasm32 plugins run on a single thread.
unsafe impl Sync for SizeClassAlloc {}

fn class_of(layout: Layout) -> Option<usize> {
    let size = layout.size().max(layout.align()).max(1 << MIN_SHIFT);
    let shift = usize::BITS - (size - 1).leading_zeros();
    let class = (shift - MIN_SHIFT) as usize;
    (class < CLASSES).then_some(class)
}

unsafe impl GlobalAlloc for SizeClassAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(class) = class_of(layout) else {
            return core::ptr::null_mut();
        };
        // SAFETY: single-threaded, and no re-entrancy into the allocator.
        let st = unsafe { &mut *self.state.get() };
        let head = st.free[class];
        if head != 0 && layout.align() <= 16 {
            // SAFETY: a free block stores the next free block in its first word.
            st.free[class] = unsafe { *(head as *const usize) };
            return head as *mut u8;
        }
        if st.end == 0 {
            // First allocation: use the room the linker left between the
            // data and the end of the initial memory before growing it
            // (growing is a system call in the host).
            unsafe extern "C" {
                static __heap_base: u8;
            }
            st.bump = core::ptr::addr_of!(__heap_base) as usize;
            st.end = core::arch::wasm32::memory_size(0) * PAGE;
        }
        let size = 1usize << (class as u32 + MIN_SHIFT);
        let align = layout.align().max(16);
        let start = (st.bump + align - 1) & !(align - 1);
        if start + size > st.end {
            let pages = size.div_ceil(PAGE).max(1);
            let prev = core::arch::wasm32::memory_grow(0, pages);
            if prev == usize::MAX {
                return core::ptr::null_mut();
            }
            let base = prev * PAGE;
            if base != st.end {
                st.bump = base;
            }
            st.end = base + pages * PAGE;
            return unsafe { self.alloc(layout) };
        }
        st.bump = start + size;
        start as *mut u8
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let Some(class) = class_of(layout) else {
            return;
        };
        // SAFETY: as in `alloc`; the block is at least 16 bytes.
        let st = unsafe { &mut *self.state.get() };
        unsafe { *(ptr as *mut usize) = st.free[class] };
        st.free[class] = ptr as usize;
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller upholds GlobalAlloc's contract.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if class_of(layout) == class_of(new_layout) {
            return ptr;
        }
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            unsafe {
                core::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: SizeClassAlloc = SizeClassAlloc {
    state: UnsafeCell::new(State {
        free: [0; CLASSES],
        bump: 0,
        end: 0,
    }),
};

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    // A trap: the host removes the plugin from the connection.
    core::arch::wasm32::unreachable()
}
